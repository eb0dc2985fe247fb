/**
 * Boot-time cleanup of what a crash (or a failed step) can leave: work areas of imports and
 * creations, tarballs without a record (partial writes, interrupted deletes and renames),
 * records of instances that are gone, and records whose tarball is missing.
 */
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import type { PluginContext } from '../../../sdk/index.js';
import { removeUnrecordedBackupFiles } from '../../../sdk/lib/backup/store.js';
import type { InstanceManager } from '../manager.js';
import type { BackupManager } from './manager.js';

export async function cleanupBackupLeftovers(ctx: PluginContext, instances: InstanceManager, backups: BackupManager): Promise<void> {
  const files = backups.files;
  await files.ensure();
  const scratch = await files.removeScratch();
  if (scratch.length) ctx.log.warn({ scratch }, 'removed backup work areas left by a crash');

  const owners = new Set((await instances.index.list()).map((s) => `${s.project}/${s.name}`));
  const expected = new Set<string>();
  for (const stored of await backups.records.list()) {
    const instance = stored.name.slice(0, stored.name.indexOf('/'));
    const file = files.file(stored.project, instance, stored.doc.name);
    const present = await stat(file).then((st) => st.isFile(), () => false);
    if (owners.has(`${stored.project}/${instance}`) && present) {
      expected.add(file);
      continue;
    }
    ctx.log.warn({ project: stored.project, backup: stored.name, present }, 'removing a backup record whose instance or tarball is gone');
    await backups.records.delete(stored.project, stored.name).catch((err) => ctx.log.error({ err }, 'backup record removal failed'));
  }

  const dirs = (await readdir(files.instancesRoot).catch(() => [] as string[])).map((dir) => path.join(files.instancesRoot, dir));
  await removeUnrecordedBackupFiles(ctx.log, dirs, expected, 'removing a backup file that has no record (left by a crash)');
}
