/** Every instance route is served under /1.0/instances and the legacy per-type prefixes. */
import type { InstanceType } from '../../../sdk/index.js';

const PREFIXES: { prefix: string; type?: InstanceType }[] = [
  { prefix: '/1.0/instances' },
  { prefix: '/1.0/containers', type: 'container' },
  { prefix: '/1.0/virtual-machines', type: 'virtual-machine' },
];

/** `suffix` is appended to each prefix: `/{name}/state` -> /1.0/instances/{name}/state + aliases. */
export function instancePaths(suffix = ''): { path: string; aliases: string[] } {
  const [first, ...rest] = PREFIXES.map((p) => `${p.prefix}${suffix}`);
  return { path: first, aliases: rest };
}

/** The collection prefix a request came through, and the instance type it is limited to. */
export function prefixOf(requestPath: string): { prefix: string; type?: InstanceType } {
  return PREFIXES.find((p) => requestPath === p.prefix || requestPath.startsWith(`${p.prefix}/`)) ?? PREFIXES[0];
}
