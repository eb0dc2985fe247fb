/**
 * About how many bytes tar will write for some trees: a header block per entry and file data
 * rounded up to whole blocks. Only the progress percentage uses it, so unreadable entries are skipped.
 */
import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';

const BLOCK = 512;

const fileBlocks = async (file: string) => {
  const info = await lstat(file).catch(() => undefined);
  return info ? Math.ceil(info.size / BLOCK) * BLOCK : 0;
};

async function directory(dir: string): Promise<number> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  const sizes = await Promise.all(entries.map(async (e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return BLOCK + await directory(full);
    return BLOCK + (e.isFile() ? await fileBlocks(full) : 0);
  }));
  return sizes.reduce((a, b) => a + b, 0);
}

export async function estimateTarSize(dir: string, members: string[]): Promise<number> {
  let total = 0;
  for (const member of members) {
    const full = path.join(dir, member);
    const info = await lstat(full).catch(() => undefined);
    if (!info) continue;
    total += BLOCK + (info.isDirectory() ? await directory(full) : Math.ceil(info.size / BLOCK) * BLOCK);
  }
  return total;
}
