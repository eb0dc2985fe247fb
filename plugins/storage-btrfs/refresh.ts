/**
 * Refresh on one btrfs pool: missing snapshots are read-only snapshots of the source's, and the
 * content is swapped for a writable snapshot of the source, so nothing is copied file by file.
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { notFound, type PoolInfo, type VolumeRef, type VolumeRefresh } from '../../sdk/index.js';
import type { BtrfsSnapshots } from './snapshots.js';
import { Subvolumes, exists } from './subvolumes.js';

export class BtrfsRefresh implements VolumeRefresh {
  constructor(
    private readonly subvolumes: Subvolumes,
    private readonly snapshots: BtrfsSnapshots,
    private readonly volumePath: (pool: PoolInfo, vol: VolumeRef) => string,
  ) {}

  async refresh(pool: PoolInfo, source: VolumeRef, target: VolumeRef, snapshots: string[]): Promise<void> {
    const from = this.volumePath(pool, source);
    if (!(await exists(from))) throw notFound(`Volume "${source.name}" not found on storage pool "${pool.name}"`);
    const have = new Set(await this.snapshots.list(pool, target));
    const added: string[] = [];
    try {
      for (const name of snapshots) {
        if (have.has(name)) continue;
        const to = this.snapshots.path(pool, target, name);
        await mkdir(path.dirname(to), { recursive: true, mode: 0o700 });
        await this.subvolumes.snapshot(this.snapshots.path(pool, source, name), to, true);
        added.push(name);
      }
      await this.snapshots.replaceWith(pool, target, from);
    } catch (err) {
      for (const name of added) await this.snapshots.delete(pool, target, name).catch(() => {});
      throw err;
    }
  }
}
