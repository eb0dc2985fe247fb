/** The btrfs commands the driver uses, each on a path the driver computed inside the pool. */
import { lstat, readdir, rmdir } from 'node:fs/promises';
import path from 'node:path';
import type { HostTools } from '../../sdk/index.js';

const LONG_MS = 30 * 60_000;
/** The inode number of every subvolume's root directory. */
const SUBVOLUME_INO = 256;

export const exists = (p: string) => lstat(p).then(() => true, () => false);

export class Subvolumes {
  constructor(private readonly tools: HostTools) {}

  async create(at: string): Promise<void> {
    await this.tools.run('btrfs', ['subvolume', 'create', at]);
  }

  /** A snapshot of `from` at `to`, read-only with `readonly` (instant: extents are shared). */
  async snapshot(from: string, to: string, readonly = false): Promise<void> {
    await this.tools.run('btrfs', ['subvolume', 'snapshot', ...(readonly ? ['-r'] : []), from, to]);
  }

  async setReadonly(at: string, readonly: boolean): Promise<void> {
    await this.tools.run('btrfs', ['property', 'set', '-ts', at, 'ro', String(readonly)]);
  }

  async isSubvolume(at: string): Promise<boolean> {
    const st = await lstat(at).catch(() => undefined);
    return st !== undefined && st.isDirectory() && st.ino === SUBVOLUME_INO;
  }

  /**
   * Delete the subvolume at `at` (absent: nothing to do), with any subvolume nested in it (a
   * container's systemd makes some). A plain directory in its place (a pool on a file system
   * that lost its subvolume) is removed with rm.
   */
  async delete(at: string): Promise<void> {
    const st = await lstat(at).catch(() => undefined);
    if (!st) return;
    if (!st.isDirectory() || st.ino !== SUBVOLUME_INO) {
      await this.tools.run('rm', ['-rf', '--', at], { timeoutMs: LONG_MS, endWithDaemon: true });
      return;
    }
    const result = await this.tools.run('btrfs', ['subvolume', 'delete', at], { allowFailure: true });
    if (result.exitCode === 0) return;
    // Nested subvolumes (or a read-only one we must open up first): delete depth first.
    await this.setReadonly(at, false).catch(() => {});
    await this.deleteNested(at, st.dev);
    await this.tools.run('btrfs', ['subvolume', 'delete', at]);
  }

  private async deleteNested(dir: string, dev: number): Promise<void> {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      const full = path.join(dir, entry.name);
      const st = await lstat(full);
      if (st.ino === SUBVOLUME_INO && st.dev !== dev) await this.delete(full);
      else if (st.dev === dev) await this.deleteNested(full, dev);
    }
  }

  /** Remove an empty directory left over by the layout (snapshot parents). */
  async removeEmptyDir(dir: string): Promise<void> {
    await rmdir(dir).catch(() => {});
  }
}
