/**
 * Small JSON lists kept next to a container's config (its NICs, its mounts): read back as empty
 * when missing or unreadable, replaced whole through a rename so a crash leaves the old or the new.
 */
import { readFileSync } from 'node:fs';
import { rename, writeFile } from 'node:fs/promises';

export function readList<T>(file: string): T[] {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as T[];
  } catch {
    return [];
  }
}

export async function writeList<T>(file: string, list: T[]): Promise<void> {
  await writeFile(`${file}.new`, JSON.stringify(list));
  await rename(`${file}.new`, file);
}
