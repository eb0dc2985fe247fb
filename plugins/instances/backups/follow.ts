/**
 * An instance's backups go where the instance goes: deleted with it, renamed with it. Tapped on
 * the family's `removed` and `renamed` hooks, after the instance's own records changed; neither
 * throws (the instance change has already happened), and what a failure or a crash leaves is
 * removed at boot.
 */
import { link, mkdir, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { PluginContext } from '../../../sdk/index.js';
import { BackupFiles } from './files.js';
import { BACKUPS_COLLECTION } from './manager.js';
import { backupKey, type BackupRecord } from './record.js';

export async function removeInstanceBackups(ctx: PluginContext, project: string, name: string): Promise<void> {
  const files = new BackupFiles(ctx);
  try {
    await ctx.store.transaction(async (tx) => {
      const records = tx.collection<BackupRecord>(BACKUPS_COLLECTION);
      for (const stored of await records.list(project, `${name}/`)) await records.delete(project, stored.name);
    });
    await rm(files.dirOf(project, name), { recursive: true, force: true });
  } catch (err) {
    ctx.log.error({ err, project, instance: name }, 'removing the backups of a deleted instance failed (the boot cleanup retries)');
  }
}

/**
 * Files are linked under the new name (in `newProject` when the instance moved there) first, the
 * records move in one transaction, then the old files go.
 */
export async function renameInstanceBackups(ctx: PluginContext, project: string, oldName: string, newName: string, newProject = project): Promise<void> {
  const files = new BackupFiles(ctx);
  const from = files.dirOf(project, oldName);
  const to = files.dirOf(newProject, newName);
  try {
    const stored = await ctx.store.collection<BackupRecord>(BACKUPS_COLLECTION).list(project, `${oldName}/`);
    if (stored.length === 0) {
      await rm(from, { recursive: true, force: true });
      return;
    }
    // Anything under the new name has no record (the name was free): a leftover.
    await rm(to, { recursive: true, force: true });
    await mkdir(to, { recursive: true, mode: 0o700 });
    try {
      for (const entry of await readdir(from)) {
        if (!entry.startsWith('.partial-')) await link(path.join(from, entry), path.join(to, entry));
      }
      await ctx.store.transaction(async (tx) => {
        const records = tx.collection<BackupRecord>(BACKUPS_COLLECTION);
        for (const s of stored) await records.rename(project, s.name, newProject, backupKey(newName, s.doc.name));
      });
    } catch (err) {
      await rm(to, { recursive: true, force: true });
      throw err;
    }
    await rm(from, { recursive: true, force: true });
  } catch (err) {
    ctx.log.error({ err, project, from: oldName, to: newName }, 'moving the backups of a renamed instance failed; they stay under the old name');
  }
}
