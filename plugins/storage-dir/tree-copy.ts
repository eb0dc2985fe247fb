/**
 * Copying a volume tree for its own snapshots and restores, sharing symlink inodes.
 *
 * On the ext4 these hosts run, creating an inode costs up to a millisecond while adding a hard
 * link costs a twentieth of that, and system root filesystems are mostly symlinks. A symlink's
 * target cannot change in place (it is replaced, which makes a new inode), so a snapshot and its
 * volume can share symlink inodes; only an lchown or lutimes of a symlink shows on both
 * (docs/decisions/0006). Everything else is a real copy:
 *   1. `cp -a -l` makes the directories (attributes and xattrs kept) and links every other entry;
 *   2. every entry that is neither a directory nor a symlink is copied again over its link with
 *      `cp -a --remove-destination`, entries sharing an inode in one call so cp keeps them linked
 *      to each other (and to nothing outside the copy);
 *   3. directory times, changed by step 2, are set back to the source's.
 */
import { lstat, readdir, utimes } from 'node:fs/promises';
import path from 'node:path';
import type { HostTools } from '../../sdk/index.js';

const LONG_MS = 30 * 60_000;
/** Paths per cp call: far below the argument size limit even for long names. */
const CHUNK = 400;

interface Walked {
  /** Relative paths of entries to copy for real, with their source inode. */
  files: { rel: string; ino: number }[];
  /** Relative paths of directories, parents before children. */
  dirs: string[];
}

async function walk(root: string): Promise<Walked> {
  const out: Walked = { files: [], dirs: [''] };
  const visit = async (rel: string): Promise<void> => {
    for (const entry of await readdir(path.join(root, rel), { withFileTypes: true })) {
      const child = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isDirectory()) {
        out.dirs.push(child);
        await visit(child);
      } else if (!entry.isSymbolicLink()) {
        out.files.push({ rel: child, ino: (await lstat(path.join(root, child))).ino });
      }
    }
  };
  await visit('');
  return out;
}

/** Chunks of paths where all the names of one inode fall in the same chunk. */
function chunks(files: { rel: string; ino: number }[]): string[][] {
  const sorted = [...files].sort((a, b) => a.ino - b.ino);
  const out: string[][] = [];
  let current: string[] = [];
  sorted.forEach((f, i) => {
    if (current.length >= CHUNK && f.ino !== sorted[i - 1]!.ino) {
      out.push(current);
      current = [];
    }
    current.push(f.rel);
  });
  if (current.length) out.push(current);
  return out;
}

/** Copy `from` to `to` (which must not exist), sharing only symlink inodes with `from`. */
export async function copyTreeSharingSymlinks(tools: HostTools, from: string, to: string): Promise<void> {
  await tools.run('cp', ['-a', '-l', '--no-target-directory', '--', from, to], { timeoutMs: LONG_MS, endWithDaemon: true });
  const { files, dirs } = await walk(from);
  for (const chunk of chunks(files)) {
    // Relative names from the source root, recreated under `to` by --parents.
    await tools.run('cp', ['-a', '--reflink=auto', '--parents', '--remove-destination', '--', ...chunk, to], { cwd: from, timeoutMs: LONG_MS, endWithDaemon: true });
  }
  for (const rel of dirs.reverse()) {
    const st = await lstat(path.join(from, rel));
    await utimes(path.join(to, rel), st.atime, st.mtime);
  }
}
