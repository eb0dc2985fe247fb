/**
 * GET /1.0/instances/{name}/backups. lxc 5.0.2's `lxc info` lists backups and refuses to run
 * against a server without `container_backup`; creating backups is not in this build yet, so the
 * list is what the `backups` collection holds (see docs/decisions/0003-container-backup-listing.md).
 */
import { collection, type PluginContext, type RouteDescriptor } from '../../../sdk/index.js';
import type { InstanceManager } from '../manager.js';
import { instancePaths, prefixOf } from './paths.js';

export function backupRoutes(ctx: PluginContext, manager: InstanceManager): RouteDescriptor {
  const backups = ctx.store.collection<Record<string, unknown>>('backups');
  return {
    ...instancePaths('/{name}/backups'),
    extension: 'container_backup',
    get: {
      handler: async (req) => {
        const handle = await manager.load(req.project, req.params.name);
        const stored = await backups.list(handle.project, `${handle.name}/`);
        const base = `${prefixOf(req.path).prefix}/${encodeURIComponent(handle.name)}/backups`;
        return collection(stored, (s) => `${base}/${encodeURIComponent(s.name.slice(handle.name.length + 1))}`, (s) => s.doc);
      },
    },
  };
}
