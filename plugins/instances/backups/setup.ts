/**
 * Wires instance backups into the instances plugin: the server key, the backup records shown at
 * recursion 2, following instance renames and removals, the boot cleanup and the expiry task;
 * answers the routes.
 */
import { daemonStorageAvailable, type PluginContext, type RouteDescriptor } from '../../../sdk/index.js';
import type { InstanceManager } from '../manager.js';
import { backupRoutes } from '../routes/backups.js';
import { scheduleBackupExpiry } from './expiry.js';
import { BACKUP_SERVER_KEYS } from './keys.js';
import { cleanupBackupLeftovers } from './leftovers.js';
import { BackupManager } from './manager.js';
import { backupView, byName } from './record.js';
import { removeInstanceBackups, renameInstanceBackups } from './follow.js';
import { groupByInstance } from '../children.js';

export function setupBackups(ctx: PluginContext, manager: InstanceManager): RouteDescriptor[] {
  for (const key of BACKUP_SERVER_KEYS) if (!ctx.keys.lookup('server', key.key!)) ctx.keys.register(key);
  const backups = new BackupManager(ctx, manager);
  manager.children.backups = {
    of: async (handle) => (await backups.list(handle)).map((s) => backupView(s.doc)),
    all: async (project) => groupByInstance(await backups.records.list(project), byName, (s) => backupView(s.doc)),
  };
  manager.hooks.removed.tapPromise('backups', (instance) => removeInstanceBackups(ctx, instance.project, instance.name));
  manager.hooks.renamed.tapPromise('backups', ({ from, to }) => renameInstanceBackups(ctx, from.project, from.name, to.name, to.project));
  let expiry: { stop(): void } | undefined;
  ctx.hooks.ready.tap(async () => {
    // Backups on an unavailable volume (warned about by the storage family) are left alone.
    if (daemonStorageAvailable(ctx, 'backups')) await cleanupBackupLeftovers(ctx, manager, backups);
    expiry = scheduleBackupExpiry(ctx, manager, backups);
  });
  ctx.hooks.shutdown.tap(async () => {
    expiry?.stop();
  });
  return backupRoutes(ctx, manager, backups);
}
