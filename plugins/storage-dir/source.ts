/**
 * The pool's source directory: given by the user (an empty directory, or a path to create) or
 * defaulted under the data directory. Whether the driver created it decides what deleting the
 * pool does: a directory the driver made goes away, one the user brought is emptied and kept,
 * as the reference does. That fact lives in this plugin's store.
 */
import { chmod, mkdir, readdir, rmdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { badRequest, type Collection, type HostTools } from '../../sdk/index.js';
import { LAYOUT, LAZY_DIRS } from './layout.js';
import { removeInside } from './remove.js';

export interface SourceRecord {
  source: string;
  /** The driver made the directory (it did not exist before the pool). */
  created: boolean;
}

const LAYOUT_DIRS = new Set([...LAYOUT.map((l) => l.dir), ...LAZY_DIRS]);

async function isEmptyDir(dir: string): Promise<boolean> {
  return (await readdir(dir)).length === 0;
}

/** Empty, or holding only the empty layout a pool creation interrupted by a crash leaves behind. */
async function isReusable(dir: string): Promise<boolean> {
  for (const entry of await readdir(dir)) {
    if (!LAYOUT_DIRS.has(entry)) return false;
    const sub = path.join(dir, entry);
    if (!(await stat(sub)).isDirectory() || !(await isEmptyDir(sub))) return false;
  }
  return true;
}

/** Make or adopt the source directory; returns whether it was made here. */
export async function prepareSource(source: string): Promise<boolean> {
  if (!path.isAbsolute(source)) throw badRequest(`Source path "${source}" must be absolute`);
  const dir = path.resolve(source);
  let existing;
  try {
    existing = await stat(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (existing) {
    if (!existing.isDirectory()) throw badRequest(`Source path "${source}" isn't a directory`);
    if (!(await isReusable(dir))) throw badRequest(`Source path "${source}" isn't empty`);
    return false;
  }
  await mkdir(path.dirname(dir), { recursive: true, mode: 0o711 });
  await mkdir(dir, { mode: 0o711 });
  return true;
}

export async function makeLayout(source: string): Promise<void> {
  for (const { dir, mode } of LAYOUT) {
    await mkdir(path.join(source, dir), { mode }).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
    // Pools made by older versions get the current modes too (and mkdir's umask is undone).
    await chmod(path.join(source, dir), mode);
  }
}

/** Remove the pool's content; the directory itself too when the driver made it. */
export async function clearSource(tools: HostTools, source: string, created: boolean): Promise<void> {
  const dir = path.resolve(source);
  if (!(await stat(dir).then((s) => s.isDirectory(), () => false))) return;
  for (const sub of [...LAYOUT.map((l) => l.dir), ...LAZY_DIRS]) await removeInside(tools, dir, dir, sub);
  if (!created) return;
  // Anything else found there was put there by hand: keep it rather than guess.
  await rmdir(dir).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'ENOENT' && err.code !== 'ENOTEMPTY') throw err;
  });
}

export class SourceRegistry {
  constructor(private readonly records: Collection<SourceRecord>) {}

  async created(pool: string): Promise<boolean> {
    return (await this.records.get('', pool))?.doc.created ?? false;
  }

  async remember(pool: string, record: SourceRecord): Promise<void> {
    await this.records.put('', pool, record);
  }

  async forget(pool: string): Promise<void> {
    await this.records.delete('', pool);
  }
}
