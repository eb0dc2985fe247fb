/**
 * Removing a tree inside a pool without ever touching anything outside it: the parent directory
 * is resolved and must be where the pool says it is (a type directory swapped for a symlink is
 * refused), a symlink in the volume's place is unlinked, not followed, and `rm` itself neither
 * follows symlinks nor crosses into other mounted file systems.
 */
import { lstat, readdir, realpath, rmdir, unlink } from 'node:fs/promises';
import path from 'node:path';
import { internalError, type HostTools } from '../../sdk/index.js';

const LONG_MS = 30 * 60_000;

/** Remove `<parent>/<entry>` where `parent` must resolve to `expectedParent` (both inside `root`). */
export async function removeInside(tools: HostTools, root: string, parent: string, entry: string): Promise<void> {
  await removeAllInside(tools, root, [{ parent, entry }]);
}

/** The same for several entries, with one `rm` for all the directories among them (a child costs more than the removal of a small tree). */
export async function removeAllInside(tools: HostTools, root: string, targets: { parent: string; entry: string }[]): Promise<void> {
  let realRoot: string | undefined;
  const dirs: string[] = [];
  for (const { parent, entry } of targets) {
    let realParent: string;
    try {
      realParent = await realpath(parent);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw err;
    }
    realRoot ??= await realpath(root);
    const expected = path.join(realRoot, path.relative(path.resolve(root), path.resolve(parent)));
    if (realParent !== expected || !(realParent === realRoot || realParent.startsWith(realRoot + path.sep))) {
      throw internalError(`Refusing to remove "${entry}": "${parent}" does not resolve inside the pool`);
    }
    const target = path.join(realParent, entry);
    let stats;
    try {
      stats = await lstat(target);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw err;
    }
    if (!stats.isDirectory()) {
      await unlink(target).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') throw err;
      });
      continue;
    }
    if (!(await removedIfHollow(target))) dirs.push(target);
  }
  if (dirs.length) await tools.run('rm', ['-rf', '--one-file-system', '--', ...dirs], { timeoutMs: LONG_MS, endWithDaemon: true });
}

/**
 * Removes `dir` when it holds nothing but empty directories (a volume made with no source is one empty
 * `rootfs`), without a child process: starting `rm` was most of such a delete. Anything else, a mount point
 * included (rmdir refuses it), is left for rm; false then, with some empty children maybe gone already.
 */
async function removedIfHollow(dir: string): Promise<boolean> {
  const gone = (err: NodeJS.ErrnoException) => err.code === 'ENOENT';
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (err) {
    return gone(err as NodeJS.ErrnoException);
  }
  if (entries.length > 8 || entries.some((e) => !e.isDirectory())) return false;
  for (const entry of entries) {
    if (!(await rmdir(path.join(dir, entry.name)).then(() => true, gone))) return false;
  }
  return rmdir(dir).then(() => true, gone);
}
