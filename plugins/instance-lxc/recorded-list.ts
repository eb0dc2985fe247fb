/**
 * Small JSON lists kept next to a container's config (its NICs, its mounts): read back as empty
 * when missing or unreadable, replaced whole through a rename so a crash leaves the old or the new.
 * An empty list is no file at all: most containers have no mounts or device nodes to undo, and a
 * removal of nothing costs no new inode at each start and stop, where a write and rename cost one.
 */
import { readFileSync } from 'node:fs';
import { rename, rm, writeFile } from 'node:fs/promises';

export function readList<T>(file: string): T[] {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as T[];
  } catch {
    return [];
  }
}

export async function writeList<T>(file: string, list: T[]): Promise<void> {
  if (!list.length) {
    await rm(file, { force: true });
    return;
  }
  await writeFile(`${file}.new`, JSON.stringify(list));
  await rename(`${file}.new`, file);
}
