/**
 * The steps instance and custom volume backups take alike: checking a create request, and keeping
 * a tarball and its record in step. The file first, the record last on create; a rename links the
 * new name before the record moves and unlinks the old one after. So a crash leaves at worst a
 * file without a record, which the family's boot cleanup removes.
 */
import { link, readdir, rename, rm, rmdir, unlink } from 'node:fs/promises';
import path from 'node:path';
import type Logger from 'bunyan';
import { checkBackupAlgorithm, type BackupAlgorithm } from './compression.js';
import { checkBackupName, nextBackupName, parseBackupExpiry } from './names.js';
import { writeBackupTarball, type BackupTarballSpec } from './tarball.js';
import { badRequest, conflict } from '../../errors.js';
import type { PluginContext } from '../../plugin.js';
import { ProjectsServiceRef } from '../../projects.js';

export interface BackupRequestBasics {
  name: string;
  expiresAt: string;
  algorithm: BackupAlgorithm;
}

/**
 * The parts of a create request both families share: `name` (the first free `backupN` when
 * absent), the boolean `flags`, `compression_algorithm` (the project's
 * backups.compression_algorithm, then the server's, then gzip) and `expires_at`.
 */
export async function planBackupRequest(
  ctx: PluginContext, project: string, body: Record<string, unknown>, flags: readonly string[], taken: ReadonlySet<string>,
): Promise<BackupRequestBasics> {
  if (body.name !== undefined && body.name !== null && typeof body.name !== 'string') throw badRequest('"name" must be a string');
  for (const field of flags) {
    if (body[field] !== undefined && body[field] !== null && typeof body[field] !== 'boolean') throw badRequest(`"${field}" must be true or false`);
  }
  if (body.compression_algorithm !== undefined && body.compression_algorithm !== null && typeof body.compression_algorithm !== 'string') {
    throw badRequest('"compression_algorithm" must be a string');
  }
  const name = (body.name as string | undefined) || nextBackupName(taken);
  checkBackupName(name);
  if (taken.has(name)) throw conflict(`Backup "${name}" already exists`);
  const projectAlgorithm = (await ctx.services.get(ProjectsServiceRef)?.get(project))?.config['backups.compression_algorithm'];
  const algorithm = await checkBackupAlgorithm(ctx.hostTools,
    (body.compression_algorithm as string | undefined) || projectAlgorithm || ctx.serverConfig.get('backups.compression_algorithm') || 'gzip');
  return { name, expiresAt: parseBackupExpiry(body.expires_at), algorithm };
}

/**
 * Writes the tarball under `temp` (in the backup's directory), moves it to `file`, then stores the
 * record; a failing store removes the file again (and the directory, when it held nothing else),
 * and the temporary name never outlives the call.
 */
export async function storeBackupFile(
  ctx: PluginContext, spec: Omit<BackupTarballSpec, 'output'>, temp: string, file: string, putRecord: () => Promise<unknown>,
): Promise<void> {
  let stored = false;
  try {
    await writeBackupTarball(ctx.hostTools, { ...spec, output: temp });
    await rename(temp, file);
    try {
      await putRecord();
      stored = true;
    } catch (err) {
      await rm(file, { force: true });
      throw err;
    }
  } finally {
    await rm(temp, { force: true });
    if (!stored) await removeEmptyBackupDir(path.dirname(file));
  }
}

/**
 * Removes a backup's tarball, and its instance's or volume's backup directory once that holds no
 * other: as with the reference, a directory per owner exists only while it has backups. Callers
 * keep creations in the same directory from running meanwhile (the owner's lock).
 */
export async function removeBackupFile(file: string): Promise<void> {
  await rm(file, { force: true });
  await removeEmptyBackupDir(path.dirname(file));
}

/** Best effort: a directory still in use stays, and one left by a failure goes at the next boot's cleanup. */
async function removeEmptyBackupDir(dir: string): Promise<void> {
  await rmdir(dir).catch(() => {});
}

/** Gives a backup's tarball its new name around `moveRecord`, undoing the link when the record cannot move. */
export async function renameBackupFile(log: Logger, from: string, to: string, moveRecord: () => Promise<unknown>): Promise<void> {
  await link(from, to);
  try {
    await moveRecord();
  } catch (err) {
    await unlink(to).catch(() => {});
    throw err;
  }
  await unlink(from).catch((err) => log.warn({ err, file: from }, 'removing the old name of a renamed backup failed'));
}

/** Boot: in each of `dirs`, removes the files not `expected` (with `message`), and the directory once nothing is kept. */
export async function removeUnrecordedBackupFiles(log: Logger, dirs: string[], expected: ReadonlySet<string>, message: string): Promise<void> {
  for (const dir of dirs) {
    let kept = 0;
    for (const entry of await readdir(dir).catch(() => [] as string[])) {
      const file = path.join(dir, entry);
      if (expected.has(file)) {
        kept++;
        continue;
      }
      log.warn({ file }, message);
      await rm(file, { recursive: true, force: true });
    }
    if (kept === 0) await rm(dir, { recursive: true, force: true });
  }
}
