/** The hourly task that removes expired backups, visible as an operation like the reference's. */
import { type PluginContext } from '../../../sdk/index.js';
import { backupExpired as hasExpired } from '../../../sdk/lib/backup/index.js';
import type { InstanceManager } from '../manager.js';
import type { BackupManager } from './manager.js';

const HOUR_MS = 3600_000;

export async function expireBackups(ctx: PluginContext, instances: InstanceManager, backups: BackupManager, now = Date.now()): Promise<number> {
  let removed = 0;
  for (const stored of await backups.records.list()) {
    if (!hasExpired(stored.doc.expires_at, now)) continue;
    const owner = { project: stored.project, name: stored.name.slice(0, stored.name.indexOf('/')) };
    // A backup's file is on the member holding its instance: that member removes it.
    if (!(await instances.holds(owner.project, owner.name))) continue;
    await instances.lock.run(`${owner.project}/${owner.name}`, async () => {
      // Renamed, deleted or given a new expiry while waiting for the lock: look again.
      const fresh = await backups.records.get(stored.project, stored.name);
      if (!fresh || !hasExpired(fresh.doc.expires_at, Date.now())) return;
      await backups.remove(owner, fresh.doc.name);
      removed++;
    }).catch((err) => ctx.log.error({ err, backup: stored.name }, 'removing an expired backup failed'));
  }
  return removed;
}

export function scheduleBackupExpiry(ctx: PluginContext, instances: InstanceManager, backups: BackupManager): { stop(): void } {
  const run = () => {
    ctx.operations.create({
      class: 'task',
      description: 'Cleaning up expired instance backups',
      run: async () => {
        const removed = await expireBackups(ctx, instances, backups);
        if (removed) ctx.log.info({ removed }, 'removed expired instance backups');
      },
    });
  };
  run();
  const timer = setInterval(run, HOUR_MS);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
