/** Every instance route is served under /1.0/instances and the legacy per-type prefixes. */
import { resourceUrl, type ApiRequest, type InstanceType } from '../../../sdk/index.js';

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

/** The `resources` of an operation about one instance, under both collection names. */
export const operationResources = (name: string) => ({ instances: [`/1.0/instances/${name}`], containers: [`/1.0/containers/${name}`] });

/** Path of something under an instance, through the collection prefix the request came by. */
export function subresourcePath(req: ApiRequest, name: string, suffix: string): string {
  return `${prefixOf(req.path).prefix}/${encodeURIComponent(name)}/${suffix}`;
}

/** The same, with the request's project. */
export function subresourceUrl(req: ApiRequest, name: string, suffix: string): string {
  return resourceUrl(subresourcePath(req, name, suffix), req.project);
}
