/** Bytes allocated under a tree, each hard-linked inode counted once (what `du` says). */
import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';

export async function treeUsage(root: string): Promise<number> {
  const seen = new Set<string>();
  let total = (await lstat(root)).blocks * 512;
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      const st = await lstat(full);
      if (st.nlink > 1 && !st.isDirectory()) {
        const id = `${st.dev}:${st.ino}`;
        if (seen.has(id)) continue;
        seen.add(id);
      }
      total += st.blocks * 512;
      if (entry.isDirectory()) await walk(full);
    }
  };
  await walk(root);
  return total;
}
