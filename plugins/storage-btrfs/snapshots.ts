/**
 * Snapshots on a btrfs pool: read-only subvolumes at `<type>-snapshots/<volume>/<snapshot>`, taken
 * atomically by one `btrfs subvolume snapshot -r`. A snapshot filled from outside (a copy from
 * another pool, a backup import) is built writable under a scratch name, made read-only, then
 * renamed into place. A restore puts a writable snapshot of the snapshot beside the volume and
 * swaps the two by renames (finished or undone at the next mount).
 */
import { chmod, mkdir, readdir, rename } from 'node:fs/promises';
import path from 'node:path';
import { conflict, notFound, type PoolInfo, type VolumeRef, type VolumeSnapshots, type VolumeType } from '../../sdk/index.js';
import { filledSnapshotMode, SNAPSHOT_DIRS, snapshotNamesIn, snapshotNamesUnder, VOLUME_MODE } from '../../sdk/lib/storage/index.js';
import { BUILDING, RESTORE_NEW, RESTORE_OLD, checkName, snapshotRoot, volumeDirName } from './layout.js';
import { Subvolumes, exists } from './subvolumes.js';

export class BtrfsSnapshots implements VolumeSnapshots {
  constructor(
    private readonly subvolumes: Subvolumes,
    private readonly root: (pool: PoolInfo) => string,
    private readonly volumePath: (pool: PoolInfo, vol: VolumeRef) => string,
  ) {}

  /** The directory holding every snapshot of a volume. */
  parent(pool: PoolInfo, vol: VolumeRef): string {
    return path.join(snapshotRoot(this.root(pool), vol.type), volumeDirName(vol));
  }

  path(pool: PoolInfo, vol: VolumeRef, snapshot: string): string {
    checkName(snapshot, 'snapshot');
    return path.join(this.parent(pool, vol), snapshot);
  }

  async create(pool: PoolInfo, vol: VolumeRef, snapshot: string, fill?: (dir: string) => Promise<void>): Promise<void> {
    const final = this.path(pool, vol, snapshot);
    await mkdir(path.dirname(final), { recursive: true, mode: 0o700 });
    if (await exists(final)) throw conflict(`Snapshot "${snapshot}" of volume "${vol.name}" already exists`);
    if (!fill) {
      const source = this.volumePath(pool, vol);
      if (!(await exists(source))) throw notFound(`Volume "${vol.name}" not found on storage pool "${pool.name}"`);
      await this.subvolumes.snapshot(source, final, true);
      return;
    }
    const scratch = path.join(path.dirname(final), BUILDING + snapshot);
    await this.subvolumes.delete(scratch);
    try {
      await this.subvolumes.create(scratch);
      await chmod(scratch, VOLUME_MODE);
      await fill(scratch);
      await chmod(scratch, filledSnapshotMode(vol.type));
      await this.subvolumes.setReadonly(scratch, true);
      await rename(scratch, final);
    } catch (err) {
      await this.subvolumes.delete(scratch).catch(() => {});
      throw err;
    }
  }

  async delete(pool: PoolInfo, vol: VolumeRef, snapshot: string): Promise<void> {
    await this.subvolumes.delete(this.path(pool, vol, snapshot));
    await this.subvolumes.removeEmptyDir(this.parent(pool, vol));
  }

  async rename(pool: PoolInfo, vol: VolumeRef, snapshot: string, newName: string): Promise<void> {
    const from = this.path(pool, vol, snapshot);
    const to = this.path(pool, vol, newName);
    if (await exists(to)) throw conflict(`Snapshot "${newName}" of volume "${vol.name}" already exists`);
    await rename(from, to).catch((err: NodeJS.ErrnoException) => {
      throw err.code === 'ENOENT' ? notFound(`Snapshot "${snapshot}" of volume "${vol.name}" not found`) : err;
    });
  }

  async restore(pool: PoolInfo, vol: VolumeRef, snapshot: string): Promise<void> {
    const from = this.path(pool, vol, snapshot);
    if (!(await exists(from))) throw notFound(`Snapshot "${snapshot}" of volume "${vol.name}" not found`);
    await this.replaceWith(pool, vol, from);
  }

  /** Swap the volume's content for a writable snapshot of `from`; the volume is untouched on failure. */
  async replaceWith(pool: PoolInfo, vol: VolumeRef, from: string): Promise<void> {
    const current = this.volumePath(pool, vol);
    if (!(await exists(current))) throw notFound(`Volume "${vol.name}" not found on storage pool "${pool.name}"`);
    const dir = path.dirname(current);
    const fresh = path.join(dir, RESTORE_NEW + path.basename(current));
    const old = path.join(dir, RESTORE_OLD + path.basename(current));
    await this.subvolumes.delete(fresh);
    try {
      await this.subvolumes.snapshot(from, fresh);
      await chmod(fresh, VOLUME_MODE);
      await rename(current, old);
    } catch (err) {
      await this.subvolumes.delete(fresh).catch(() => {});
      throw err;
    }
    try {
      await rename(fresh, current);
    } catch (err) {
      await rename(old, current).catch(() => {});
      await this.subvolumes.delete(fresh).catch(() => {});
      throw err;
    }
    await this.subvolumes.delete(old);
  }

  async list(pool: PoolInfo, vol: VolumeRef): Promise<string[]> {
    return snapshotNamesIn(this.parent(pool, vol));
  }

  async listMany(pool: PoolInfo, type: VolumeType, vols: readonly VolumeRef[]): Promise<string[][]> {
    return snapshotNamesUnder(snapshotRoot(this.root(pool), type), vols.map(volumeDirName));
  }

  /** Volume deleted: its snapshots go too. */
  async deleteAll(pool: PoolInfo, vol: VolumeRef): Promise<void> {
    if (!SNAPSHOT_DIRS[vol.type]) return;
    const parent = this.parent(pool, vol);
    for (const entry of await readdir(parent).catch(() => [] as string[])) await this.subvolumes.delete(path.join(parent, entry));
    await this.subvolumes.removeEmptyDir(parent);
  }

  /** Volume renamed: its snapshots follow. */
  async renameAll(pool: PoolInfo, vol: VolumeRef, newName: string, newProject = vol.project): Promise<void> {
    if (!SNAPSHOT_DIRS[vol.type]) return;
    await rename(this.parent(pool, vol), this.parent(pool, { ...vol, project: newProject, name: newName })).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
  }

  /** At mount: snapshots a killed daemon was filling are incomplete. */
  async recover(pool: PoolInfo): Promise<void> {
    for (const type of Object.keys(SNAPSHOT_DIRS) as VolumeType[]) {
      const root = snapshotRoot(this.root(pool), type);
      for (const volume of await readdir(root).catch(() => [] as string[])) {
        for (const entry of await readdir(path.join(root, volume)).catch(() => [] as string[])) {
          if (entry.startsWith(BUILDING)) await this.subvolumes.delete(path.join(root, volume, entry));
        }
        await this.subvolumes.removeEmptyDir(path.join(root, volume));
      }
    }
  }
}
