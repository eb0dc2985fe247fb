/**
 * GET /1.0/instances/{name}/snapshots and /backups: the records an instance owns in the
 * `snapshots` and `backups` collections, keyed `<instance>/<child>`. `lxc info` lists both (and
 * lxc 5.0.2 refuses to run without `container_backup`); making snapshots and backups is not in
 * this build yet, so the lists are what the store holds (docs/decisions/0003-container-backup-listing.md).
 */
import { collection, type PluginContext, type RouteDescriptor } from '../../../sdk/index.js';
import type { InstanceManager } from '../manager.js';
import { instancePaths, subresourcePath } from './paths.js';

function childList(ctx: PluginContext, manager: InstanceManager, kind: 'snapshots' | 'backups', extension?: string): RouteDescriptor {
  const records = ctx.store.collection<Record<string, unknown>>(kind);
  return {
    ...instancePaths(`/{name}/${kind}`),
    ...(extension ? { extension } : {}),
    get: {
      handler: async (req) => {
        const handle = await manager.load(req.project, req.params.name);
        const stored = await records.list(handle.project, `${handle.name}/`);
        const base = subresourcePath(req, handle.name, kind);
        return collection(stored, (s) => `${base}/${encodeURIComponent(s.name.slice(handle.name.length + 1))}`, (s) => s.doc);
      },
    },
  };
}

export function childListRoutes(ctx: PluginContext, manager: InstanceManager): RouteDescriptor[] {
  return [childList(ctx, manager, 'snapshots'), childList(ctx, manager, 'backups', 'container_backup')];
}
