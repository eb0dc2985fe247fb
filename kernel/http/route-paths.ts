/** Every path a route descriptor serves, each with the parameters it fixes (handed to handlers as `req.fixed`). */
import type { RouteDescriptor } from '../../sdk/index.js';

export interface ServedPath {
  readonly path: string;
  readonly fixed: Readonly<Record<string, string>>;
}

const NONE: Readonly<Record<string, string>> = Object.freeze({});

export function servedPaths(route: RouteDescriptor): ServedPath[] {
  return [
    { path: route.path, fixed: route.fixed ?? NONE },
    ...(route.aliases ?? []).map((alias) => (typeof alias === 'string' ? { path: alias, fixed: NONE } : { path: alias.path, fixed: alias.fixed })),
  ];
}
