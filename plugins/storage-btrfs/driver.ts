/**
 * The btrfs storage driver: every volume is a subvolume, so a clone (an instance from its image's
 * unpacked volume, a copy on the pool) and a snapshot are instant and share extents. A volume being
 * filled is built under a scratch name and renamed into place, so a volume that exists is whole;
 * scratch entries a killed daemon left are removed at the next mount.
 */
import { chmod, mkdir, readdir, rename, statfs } from 'node:fs/promises';
import path from 'node:path';
import {
  badRequest, conflict, notFound, type ConfigKeyDescriptor, type HostTools, type PoolInfo, type PoolResources,
  type StorageDriver, type VolumeRef, type VolumeType,
} from '../../sdk/index.js';
import { renameVolumeDir, subdirectories, treeUsage, TYPE_DIRS, typeDir, VOLUME_MODE, volumeFromDirName } from '../../sdk/lib/storage/index.js';
import { BtrfsBlockVolumes } from './block.js';
import { BTRFS_KEYS } from './keys.js';
import { BUILDING, LAYOUT, RESTORE_NEW, RESTORE_OLD, SCRATCH_DIR, checkName, isDriverScratch, volumeDirName } from './layout.js';
import { PoolSource, defaultLoopSize, loopFilePath, poolRoot } from './pool-source.js';
import { BtrfsQuotas } from './quotas.js';
import { BtrfsRefresh } from './refresh.js';
import { BtrfsSendReceive } from './send-receive.js';
import { BtrfsSnapshots } from './snapshots.js';
import { Subvolumes, exists } from './subvolumes.js';

export class BtrfsDriver implements StorageDriver {
  readonly name = 'btrfs';
  /** For `storage_supported_drivers` (the btrfs-progs version is read at plugin start). */
  version = '1';
  readonly remote = false;
  readonly configKeys: ConfigKeyDescriptor[] = BTRFS_KEYS;

  readonly subvolumes: Subvolumes;
  readonly source: PoolSource;
  readonly snapshots: BtrfsSnapshots;
  readonly quotas: BtrfsQuotas;
  readonly sendReceive: BtrfsSendReceive;
  readonly refresh: BtrfsRefresh;
  readonly blockVolumes: BtrfsBlockVolumes;

  constructor(private readonly tools: HostTools, private readonly dataDir: string) {
    this.subvolumes = new Subvolumes(tools);
    this.source = new PoolSource(tools, dataDir);
    this.snapshots = new BtrfsSnapshots(this.subvolumes, (pool) => this.root(pool), (pool, vol) => this.volumePath(pool, vol));
    this.quotas = new BtrfsQuotas(tools, (pool) => this.root(pool), (pool, vol) => this.volumePath(pool, vol));
    this.sendReceive = new BtrfsSendReceive(tools, this.subvolumes, this.snapshots, (pool) => this.root(pool), (pool, vol) => this.volumePath(pool, vol));
    this.refresh = new BtrfsRefresh(this.subvolumes, this.snapshots, (pool, vol) => this.volumePath(pool, vol));
    this.blockVolumes = new BtrfsBlockVolumes(tools, this);
  }

  root(pool: PoolInfo): string {
    return poolRoot(this.dataDir, pool);
  }

  fillDefaults(pool: PoolInfo): void {
    if (!pool.config.source) {
      pool.config.source = loopFilePath(this.dataDir, pool.name);
      // `size` is filled by `create` when left out (it needs the host's disk size).
    }
  }

  async create(pool: PoolInfo): Promise<void> {
    if (pool.config.source === loopFilePath(this.dataDir, pool.name) && !pool.config.size) pool.config.size = await defaultLoopSize(this.dataDir);
    if (pool.config.size && pool.config.source !== loopFilePath(this.dataDir, pool.name)) {
      throw badRequest('"size" applies only to loop-backed btrfs pools (no "source")');
    }
    const kind = await this.source.prepare(pool);
    try {
      await this.source.mount(pool);
      await this.makeLayout(this.root(pool));
    } catch (err) {
      await this.source.unmount(pool).catch(() => {});
      await this.source.remove(pool).catch(() => {});
      throw err;
    }
  }

  private async makeLayout(root: string): Promise<void> {
    for (const { dir, mode } of LAYOUT) {
      await mkdir(path.join(root, dir), { mode }).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw err;
      });
    }
  }

  async delete(pool: PoolInfo): Promise<void> {
    const root = this.root(pool);
    // A directory source keeps the directory (it was the user's); its volumes go.
    if (await exists(root)) {
      await this.source.mount(pool).catch(() => {});
      for (const { dir } of LAYOUT) {
        const full = path.join(root, dir);
        for (const entry of await readdir(full).catch(() => [] as string[])) {
          const at = path.join(full, entry);
          if (dir.endsWith('-snapshots')) {
            for (const snap of await readdir(at).catch(() => [] as string[])) await this.subvolumes.delete(path.join(at, snap));
            await this.subvolumes.removeEmptyDir(at);
          } else {
            await this.subvolumes.delete(at);
          }
        }
        await this.subvolumes.removeEmptyDir(full);
      }
      await this.removeScratch(pool);
      await this.subvolumes.removeEmptyDir(path.join(root, SCRATCH_DIR));
    }
    await this.source.unmount(pool);
    await this.source.remove(pool);
  }

  async mount(pool: PoolInfo): Promise<void> {
    await this.source.mount(pool);
    await this.makeLayout(this.root(pool));
    await this.recover(pool);
  }

  /** `size` grows a loop file (never shrinks it); `btrfs.mount_options` remounts the pool. */
  async update(pool: PoolInfo, changed: Record<string, string>): Promise<void> {
    if ('size' in changed) await this.source.grow(pool, changed.size!);
    if ('btrfs.mount_options' in changed) await this.source.remount(pool);
  }

  async unmount(pool: PoolInfo): Promise<void> {
    await this.source.unmount(pool);
  }

  /** Leftovers of a daemon killed mid-operation: half-filled volumes, scratch send/receive trees, restores. */
  private async recover(pool: PoolInfo): Promise<void> {
    const root = this.root(pool);
    await this.removeScratch(pool);
    for (const type of Object.keys(TYPE_DIRS) as VolumeType[]) {
      const dir = typeDir(root, type);
      for (const entry of await readdir(dir).catch(() => [] as string[])) {
        if (entry.startsWith(BUILDING) || entry.startsWith(RESTORE_NEW)) {
          await this.subvolumes.delete(path.join(dir, entry));
        } else if (entry.startsWith(RESTORE_OLD)) {
          // The swap was cut between its two renames: the volume is either back or missing.
          const volume = path.join(dir, entry.slice(RESTORE_OLD.length));
          if (await exists(volume)) await this.subvolumes.delete(path.join(dir, entry));
          else await rename(path.join(dir, entry), volume);
        }
      }
    }
    await this.snapshots.recover(pool);
  }

  private async removeScratch(pool: PoolInfo): Promise<void> {
    const scratch = path.join(this.root(pool), SCRATCH_DIR);
    for (const entry of await readdir(scratch).catch(() => [] as string[])) {
      const dir = path.join(scratch, entry);
      for (const inner of await readdir(dir).catch(() => [] as string[])) await this.subvolumes.delete(path.join(dir, inner));
      await this.subvolumes.delete(dir);
    }
  }

  async resources(pool: PoolInfo): Promise<PoolResources> {
    const fs = await statfs(this.root(pool));
    return {
      space: { used: (fs.blocks - fs.bfree) * fs.bsize, total: fs.blocks * fs.bsize },
      // btrfs allocates inodes dynamically: the reference reports what statfs says (zeros).
      inodes: { used: fs.files - fs.ffree, total: fs.files },
    };
  }

  volumePath(pool: PoolInfo, vol: VolumeRef): string {
    return path.join(typeDir(this.root(pool), vol.type), volumeDirName(vol));
  }

  /** Built as `.building-<name>` and renamed into place once `fill` is done. */
  async createVolume(pool: PoolInfo, vol: VolumeRef, fill?: (dir: string) => Promise<void>): Promise<void> {
    const final = this.volumePath(pool, vol);
    if (await exists(final)) throw conflict(`Volume "${vol.name}" already exists on storage pool "${pool.name}"`);
    const scratch = path.join(path.dirname(final), BUILDING + path.basename(final));
    await this.subvolumes.delete(scratch);
    try {
      await this.subvolumes.create(scratch);
      await chmod(scratch, VOLUME_MODE);
      await fill?.(scratch);
      await rename(scratch, final);
    } catch (err) {
      await this.subvolumes.delete(scratch).catch(() => {});
      throw err;
    }
  }

  /** A writable snapshot of the source volume (or of its snapshot): instant, extents shared. */
  async cloneVolume(pool: PoolInfo, source: VolumeRef, target: VolumeRef, fromSnapshot?: string): Promise<void> {
    const from = fromSnapshot ? this.snapshots.path(pool, source, fromSnapshot) : this.volumePath(pool, source);
    const to = this.volumePath(pool, target);
    if (!(await exists(from))) throw notFound(`Volume "${source.name}" not found on storage pool "${pool.name}"`);
    if (await exists(to)) throw conflict(`Volume "${target.name}" already exists on storage pool "${pool.name}"`);
    await this.subvolumes.snapshot(from, to);
    // A clone of a read-only snapshot is writable; keep the volume mode the instance driver needs.
    await chmod(to, VOLUME_MODE);
  }

  async deleteVolume(pool: PoolInfo, vol: VolumeRef): Promise<void> {
    await this.snapshots.deleteAll(pool, vol);
    await this.subvolumes.delete(this.volumePath(pool, vol));
  }

  async renameVolume(pool: PoolInfo, vol: VolumeRef, newName: string, newProject = vol.project): Promise<void> {
    if (vol.type !== 'image') checkName(newName);
    const from = this.volumePath(pool, vol);
    const to = this.volumePath(pool, { ...vol, project: newProject, name: newName });
    await renameVolumeDir(pool, vol, newName, from, to, () => this.snapshots.renameAll(pool, vol, newName, newProject));
  }

  async listVolumes(pool: PoolInfo, type: VolumeType): Promise<VolumeRef[]> {
    if (!TYPE_DIRS[type]) throw badRequest(`Invalid volume type "${type}"`);
    return subdirectories(typeDir(this.root(pool), type))
      .filter((name) => !isDriverScratch(name))
      .map((name) => volumeFromDirName(type, name))
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Referenced bytes from the volume's qgroup when quotas are on, else what a walk of the tree finds. */
  async volumeUsage(pool: PoolInfo, vol: VolumeRef): Promise<number | undefined> {
    const at = this.volumePath(pool, vol);
    if (!(await exists(at))) throw notFound(`Volume "${vol.name}" not found on storage pool "${pool.name}"`);
    return (await this.quotas.referenced(pool, at)) ?? treeUsage(at);
  }
}
