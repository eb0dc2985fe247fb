/**
 * In a cluster, every route about one instance is served by the member holding it, and a create by the
 * member placement picks: each route gets a `locate` the kernel forwards by. Standalone, the kernel never
 * calls it.
 */
import type { ApiRequest, PluginContext, RouteDescriptor } from '../../../sdk/index.js';
import type { InstanceManager } from '../manager.js';
import { remoteLocation } from '../location.js';
import { placeNewInstance } from '../placement.js';

export function locateInstanceRoute(ctx: PluginContext, manager: InstanceManager, route: RouteDescriptor): RouteDescriptor {
  if (route.path.includes('{name}')) {
    return {
      ...route,
      // An unknown instance is answered here (404), as is one whose record names no member yet.
      locate: async (req: ApiRequest) => remoteLocation(ctx.cluster, (await manager.records.get(req.project, req.params.name))?.doc),
    };
  }
  // The collection: only a create is placed; listings and bulk changes are answered where they arrive.
  return { ...route, locate: (req: ApiRequest) => (req.method === 'POST' ? placeNewInstance(ctx, manager, req) : undefined) };
}
