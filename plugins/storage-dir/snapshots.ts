/**
 * Snapshots on a dir pool, laid out as the reference does: `<type>-snapshots/<volume>/<snapshot>`,
 * each a copy of the volume directory that shares only symlink inodes with it (tree-copy.ts). A snapshot is built under a scratch name and renamed into place, so one
 * that exists is whole. A restore copies the snapshot beside the volume and swaps the two by
 * renames; the swap is finished or undone at the next mount if the daemon dies between them.
 */
import { chmod, lstat, mkdir, readdir, rename, rmdir, stat } from 'node:fs/promises';
import path from 'node:path';
import {
  conflict, notFound, type HostTools, type PoolInfo, type VolumeRef, type VolumeSnapshots, type VolumeType,
} from '../../sdk/index.js';
import { filledSnapshotMode, SNAPSHOT_DIRS, snapshotNamesIn, snapshotNamesUnder, treeUsage, typeDir } from '../../sdk/lib/storage/index.js';
import { checkVolumeName, volumeDirName } from './layout.js';
import { removeInside } from './remove.js';
import { copyTreeSharingSymlinks } from './tree-copy.js';

/** Scratch names start with a dot: snapshot names cannot (they are checked by the family). */
const BUILDING = '.building-';
/** Suffixes of the directories a restore swaps (never valid volume names: they contain a dot prefix). */
export const RESTORE_NEW = '.restore-new';
export const RESTORE_OLD = '.restore-old';

const missing = (err: unknown) => (err as NodeJS.ErrnoException).code === 'ENOENT';

/** What snapshots need to know of layered volumes (layers.ts). */
export interface LayerHooks {
  isLayered(pool: PoolInfo, vol: VolumeRef): Promise<boolean>;
  /** Unmount the replaced volume directory `oldDir` and drop the volume's layer (a restore put a plain tree in its place). */
  detach(pool: PoolInfo, vol: VolumeRef, oldDir: string): Promise<void>;
}

/** `<dir>/rootfs` is another file system (a layered volume's mount): hard links cannot cross into it. */
async function rootfsMounted(dir: string): Promise<boolean> {
  const [outer, inner] = await Promise.all([stat(dir), stat(path.join(dir, 'rootfs')).catch(() => undefined)]);
  return inner !== undefined && inner.dev !== outer.dev;
}

export class DirSnapshots implements VolumeSnapshots {
  constructor(
    private readonly tools: HostTools,
    private readonly volumePath: (pool: PoolInfo, vol: VolumeRef) => string,
    private readonly layers?: LayerHooks,
  ) {}

  private root(pool: PoolInfo, type: VolumeType): string {
    const dir = SNAPSHOT_DIRS[type];
    if (!dir) throw notFound(`Volumes of type "${type}" have no snapshots`);
    return path.join(path.resolve(pool.config.source), dir);
  }

  /** The directory holding every snapshot of a volume. */
  private parent(pool: PoolInfo, vol: VolumeRef): string {
    return path.join(this.root(pool, vol.type), volumeDirName(vol));
  }

  path(pool: PoolInfo, vol: VolumeRef, snapshot: string): string {
    checkVolumeName(snapshot);
    return path.join(this.parent(pool, vol), snapshot);
  }

  private async copy(from: string, to: string): Promise<void> {
    // A layered volume is read through its merged view: a whole, plain copy.
    if (await rootfsMounted(from)) {
      await this.tools.run('cp', ['-a', '--reflink=auto', '--no-target-directory', '--', from, to], { timeoutMs: 30 * 60_000, endWithDaemon: true });
      return;
    }
    return copyTreeSharingSymlinks(this.tools, from, to);
  }

  async create(pool: PoolInfo, vol: VolumeRef, snapshot: string, fill?: (dir: string) => Promise<void>): Promise<void> {
    const final = this.path(pool, vol, snapshot);
    const parent = path.dirname(final);
    const scratch = path.join(parent, BUILDING + snapshot);
    await mkdir(parent, { recursive: true, mode: 0o700 });
    if (await exists(final)) throw conflict(`Snapshot "${snapshot}" of volume "${vol.name}" already exists`);
    await this.removeEntry(pool, vol, BUILDING + snapshot);
    try {
      if (fill) {
        await mkdir(scratch, { mode: 0o711 });
        await fill(scratch);
        await chmod(scratch, filledSnapshotMode(vol.type));
      } else {
        const source = this.volumePath(pool, vol);
        if (!(await exists(source))) throw notFound(`Volume "${vol.name}" not found on storage pool "${pool.name}"`);
        await this.copy(source, scratch);
      }
      await rename(scratch, final);
    } catch (err) {
      await this.removeEntry(pool, vol, BUILDING + snapshot).catch(() => {});
      throw err;
    }
  }

  private async removeEntry(pool: PoolInfo, vol: VolumeRef, entry: string): Promise<void> {
    const source = path.resolve(pool.config.source);
    await removeInside(this.tools, source, this.parent(pool, vol), entry);
  }

  async delete(pool: PoolInfo, vol: VolumeRef, snapshot: string): Promise<void> {
    checkVolumeName(snapshot);
    await this.removeEntry(pool, vol, snapshot);
    // The per-volume directory goes with its last snapshot, as the reference leaves no empty ones.
    await rmdir(this.parent(pool, vol)).catch(() => {});
  }

  async rename(pool: PoolInfo, vol: VolumeRef, snapshot: string, newName: string): Promise<void> {
    const from = this.path(pool, vol, snapshot);
    const to = this.path(pool, vol, newName);
    if (await exists(to)) throw conflict(`Snapshot "${newName}" of volume "${vol.name}" already exists`);
    await rename(from, to).catch((err) => {
      throw missing(err) ? notFound(`Snapshot "${snapshot}" of volume "${vol.name}" not found`) : err;
    });
  }

  async restore(pool: PoolInfo, vol: VolumeRef, snapshot: string): Promise<void> {
    const from = this.path(pool, vol, snapshot);
    if (!(await exists(from))) throw notFound(`Snapshot "${snapshot}" of volume "${vol.name}" not found`);
    const current = this.volumePath(pool, vol);
    const fresh = current + RESTORE_NEW;
    const old = current + RESTORE_OLD;
    const type = typeDir(path.resolve(pool.config.source), vol.type);
    const source = path.resolve(pool.config.source);
    await removeInside(this.tools, source, type, path.basename(fresh));
    try {
      await this.copy(from, fresh);
      await rename(current, old);
    } catch (err) {
      await removeInside(this.tools, source, type, path.basename(fresh)).catch(() => {});
      throw err;
    }
    try {
      await rename(fresh, current);
    } catch (err) {
      await rename(old, current).catch(() => {});
      await removeInside(this.tools, source, type, path.basename(fresh)).catch(() => {});
      throw err;
    }
    // A layered volume's mount and upper layer go: the restored tree is plain and whole.
    if (await this.layers?.isLayered(pool, vol)) await this.layers!.detach(pool, vol, old);
    await removeInside(this.tools, source, type, path.basename(old));
  }

  usage(pool: PoolInfo, vol: VolumeRef, snapshot: string): Promise<number> {
    return treeUsage(this.path(pool, vol, snapshot));
  }

  async list(pool: PoolInfo, vol: VolumeRef): Promise<string[]> {
    return snapshotNamesIn(this.parent(pool, vol));
  }

  async listMany(pool: PoolInfo, type: VolumeType, vols: readonly VolumeRef[]): Promise<string[][]> {
    return snapshotNamesUnder(this.root(pool, type), vols.map(volumeDirName));
  }

  /** Volume deleted: its snapshots go too. */
  async deleteAll(pool: PoolInfo, vol: VolumeRef): Promise<void> {
    if (!SNAPSHOT_DIRS[vol.type]) return;
    await removeInside(this.tools, path.resolve(pool.config.source), this.root(pool, vol.type), volumeDirName(vol));
  }

  /** Volume renamed: its snapshots follow. */
  async renameAll(pool: PoolInfo, vol: VolumeRef, newName: string, newProject = vol.project): Promise<void> {
    if (!SNAPSHOT_DIRS[vol.type]) return;
    const from = this.parent(pool, vol);
    const to = this.parent(pool, { ...vol, project: newProject, name: newName });
    await rename(from, to).catch((err) => {
      if (!missing(err)) throw err;
    });
  }

  /** At mount: finish or undo a restore the daemon died in the middle of. */
  async recover(pool: PoolInfo): Promise<void> {
    const source = path.resolve(pool.config.source);
    for (const type of Object.keys(SNAPSHOT_DIRS) as VolumeType[]) {
      const dir = typeDir(source, type);
      for (const entry of await readdir(dir).catch(() => [] as string[])) {
        if (entry.endsWith(RESTORE_NEW)) {
          await removeInside(this.tools, source, dir, entry);
        } else if (entry.endsWith(RESTORE_OLD)) {
          const volume = path.join(dir, entry.slice(0, -RESTORE_OLD.length));
          if (await exists(volume)) await removeInside(this.tools, source, dir, entry);
          else await rename(path.join(dir, entry), volume);
        }
      }
    }
  }
}

const exists = (p: string) => lstat(p).then(() => true, () => false);

