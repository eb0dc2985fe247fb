/**
 * GET /1.0/instances/{name}/snapshots: the instance's snapshots (`lxc info` lists them). Records live
 * in the `snapshots` collection keyed `<instance>/<snapshot>`; creating them is not in this build yet,
 * so the list is what the store holds.
 */
import { collection, type PluginContext, type RouteDescriptor } from '../../../sdk/index.js';
import type { InstanceManager } from '../manager.js';
import { instancePaths, prefixOf } from './paths.js';

export function snapshotRoutes(ctx: PluginContext, manager: InstanceManager): RouteDescriptor {
  const snapshots = ctx.store.collection<Record<string, unknown>>('snapshots');
  return {
    ...instancePaths('/{name}/snapshots'),
    get: {
      handler: async (req) => {
        const handle = await manager.load(req.project, req.params.name);
        const stored = await snapshots.list(handle.project, `${handle.name}/`);
        const base = `${prefixOf(req.path).prefix}/${encodeURIComponent(handle.name)}/snapshots`;
        return collection(stored, (s) => `${base}/${encodeURIComponent(s.name.slice(handle.name.length + 1))}`, (s) => s.doc);
      },
    },
  };
}
