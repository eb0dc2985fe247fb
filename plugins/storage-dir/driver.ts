/** The dir storage driver: each volume is a plain directory under the pool's source. */
import { chmod, lstat, mkdir, stat, statfs } from 'node:fs/promises';
import path from 'node:path';
import {
  badRequest, conflict, notFound, type HostTools, type PoolInfo, type PoolResources, type StorageDriver,
  type CloneOptions, type VolumeRef, type VolumeType,
} from '../../sdk/index.js';
import { renameVolumeDir, subdirectories, TYPE_DIRS, VOLUME_MODE, treeUsage, typeDir, volumeFromDirName } from '../../sdk/lib/storage/index.js';
import { checkVolumeName, volumeDirName } from './layout.js';
import { LayeredVolumes } from './layers.js';
import { removeInside } from './remove.js';
import { clearSource, makeLayout, prepareSource, type SourceRegistry } from './source.js';
import { DirSnapshots } from './snapshots.js';

const LONG_MS = 30 * 60_000;

const present = (p: string) => lstat(p).then(() => true, () => false);

export class DirDriver implements StorageDriver {
  readonly name = 'dir';
  /** For `storage_supported_drivers`. */
  readonly version = '1';
  readonly remote = false;

  readonly snapshots: DirSnapshots;
  private readonly layers: LayeredVolumes;

  constructor(private readonly tools: HostTools, private readonly sources: SourceRegistry) {
    this.layers = new LayeredVolumes(tools);
    this.snapshots = new DirSnapshots(tools, (pool, vol) => this.volumePath(pool, vol), {
      isLayered: (pool, vol) => this.isLayered(pool, vol),
      detach: (pool, vol, oldDir) => this.layers.remove(pool, volumeDirName(vol), oldDir),
    });
  }

  private async isLayered(pool: PoolInfo, vol: VolumeRef): Promise<boolean> {
    return vol.type === 'container' && this.layers.isLayered(pool, volumeDirName(vol));
  }

  private containerDir(pool: PoolInfo): (dirName: string) => string {
    return (dirName) => path.join(typeDir(path.resolve(pool.config.source), 'container'), dirName);
  }

  fillDefaults(pool: PoolInfo, dataDir: string): void {
    if (!pool.config.source) pool.config.source = path.join(dataDir, 'storage-pools', pool.name);
  }

  async create(pool: PoolInfo): Promise<void> {
    const source = pool.config.source;
    const created = await prepareSource(source);
    try {
      await makeLayout(path.resolve(source));
      await this.sources.remember(pool.name, { source, created });
    } catch (err) {
      await clearSource(this.tools, source, created).catch(() => {});
      throw err;
    }
  }

  async delete(pool: PoolInfo): Promise<void> {
    await this.layers.unmountAll(pool, this.containerDir(pool));
    await clearSource(this.tools, pool.config.source, await this.sources.created(pool.name));
    await this.sources.forget(pool.name);
  }

  async mount(pool: PoolInfo): Promise<void> {
    const source = pool.config.source;
    const found = await stat(source).catch(() => undefined);
    if (!found) throw new Error(`Source path "${source}" doesn't exist`);
    if (!found.isDirectory()) throw new Error(`Source path "${source}" isn't a directory`);
    await makeLayout(path.resolve(source));
    await this.snapshots.recover(pool);
    // Layered volumes stay mounted across daemon restarts (running containers use the same mount); after a host reboot they are mounted again here.
    await this.layers.mountAll(pool, this.containerDir(pool));
  }

  async resources(pool: PoolInfo): Promise<PoolResources> {
    const fs = await statfs(pool.config.source);
    return {
      space: { used: (fs.blocks - fs.bfree) * fs.bsize, total: fs.blocks * fs.bsize },
      inodes: { used: fs.files - fs.ffree, total: fs.files },
    };
  }

  volumePath(pool: PoolInfo, vol: VolumeRef): string {
    return path.join(typeDir(path.resolve(pool.config.source), vol.type), volumeDirName(vol));
  }

  async createVolume(pool: PoolInfo, vol: VolumeRef, fill?: (dir: string) => Promise<void>): Promise<void> {
    const dir = this.volumePath(pool, vol);
    try {
      await mkdir(dir, { mode: VOLUME_MODE });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw conflict(`Volume "${vol.name}" already exists on storage pool "${pool.name}"`);
      throw err;
    }
    try {
      await chmod(dir, VOLUME_MODE);
      await fill?.(dir);
    } catch (err) {
      await this.deleteVolume(pool, vol).catch(() => {});
      throw err;
    }
  }

  /**
   * `cp -a` keeps ownership, modes, timestamps, xattrs, ACLs and hard links; `--reflink=auto`
   * shares extents where the file system can (btrfs, xfs) and copies elsewhere.
   */
  async cloneVolume(pool: PoolInfo, source: VolumeRef, target: VolumeRef, fromSnapshot?: string, opts?: CloneOptions): Promise<void> {
    const from = fromSnapshot ? this.snapshots.path(pool, source, fromSnapshot) : this.volumePath(pool, source);
    const to = this.volumePath(pool, target);
    if (!(await present(from))) throw notFound(`Volume "${source.name}" not found on storage pool "${pool.name}"`);
    if (await present(to)) throw conflict(`Volume "${target.name}" already exists on storage pool "${pool.name}"`);
    // An image shared under a writable layer (layers.ts): a mkdir and a mount instead of a copy.
    if (opts?.layered && source.type === 'image' && target.type === 'container' && !fromSnapshot && (await this.layers.eligible(pool, from, volumeDirName(target), to))) {
      await this.layers.create(pool, from, volumeDirName(target), to, (await lstat(from)).mode & 0o7777);
      return;
    }
    try {
      await this.tools.run('cp', ['-a', '--reflink=auto', '--no-target-directory', '--', from, to], { timeoutMs: LONG_MS, endWithDaemon: true });
    } catch (err) {
      await this.deleteVolume(pool, target).catch(() => {});
      throw err;
    }
  }

  async deleteVolume(pool: PoolInfo, vol: VolumeRef): Promise<void> {
    const source = path.resolve(pool.config.source);
    await this.snapshots.deleteAll(pool, vol);
    // An image whose files layered volumes still share is kept aside until the last of them goes.
    if (vol.type === 'image' && (await present(this.volumePath(pool, vol))) && (await this.layers.retireIfUsed(pool, this.volumePath(pool, vol)))) return;
    const volume = { parent: typeDir(source, vol.type), entry: volumeDirName(vol) };
    if (!(await this.isLayered(pool, vol))) return removeInside(this.tools, source, volume.parent, volume.entry);
    await this.layers.unmount(this.volumePath(pool, vol));
    await this.layers.dropWith(pool, volumeDirName(vol), [volume]);
  }

  async renameVolume(pool: PoolInfo, vol: VolumeRef, newName: string, newProject = vol.project): Promise<void> {
    checkVolumeName(newName);
    const from = this.volumePath(pool, vol);
    const target = { ...vol, project: newProject, name: newName };
    const to = this.volumePath(pool, target);
    const move = () => renameVolumeDir(pool, vol, newName, from, to, () => this.snapshots.renameAll(pool, vol, newName, newProject));
    if (!(await this.isLayered(pool, vol))) return move();
    if (await present(to)) throw conflict(`Volume "${newName}" already exists on storage pool "${pool.name}"`);
    await this.layers.rename(pool, volumeDirName(vol), volumeDirName(target), from, to, move);
  }

  /** A layered volume becomes a plain one holding its whole tree (before an id-mapped start). */
  async flattenVolume(pool: PoolInfo, vol: VolumeRef): Promise<void> {
    if (await this.isLayered(pool, vol)) await this.layers.flatten(pool, volumeDirName(vol), this.volumePath(pool, vol));
  }

  /**
   * Bytes a custom volume's files take (a walk of its tree). Container volumes answer nothing, as the
   * reference's dir driver does: their state is read for every instance of a listing, and a walk per
   * instance would make recursion=2 cost a tree walk times the number of instances. A VM volume is a
   * handful of files (its disk, UEFI variables, metadata): what its sparse disk takes is cheap to tell.
   */
  async volumeUsage(pool: PoolInfo, vol: VolumeRef): Promise<number | undefined> {
    if (vol.type === 'container') return undefined;
    return treeUsage(this.volumePath(pool, vol));
  }

  async listVolumes(pool: PoolInfo, type: VolumeType): Promise<VolumeRef[]> {
    if (!TYPE_DIRS[type]) throw badRequest(`Invalid volume type "${type}"`);
    const names = subdirectories(typeDir(path.resolve(pool.config.source), type));
    // Names with a dot suffix are a restore's scratch copies, not volumes.
    return names.filter((name) => !name.includes('.restore-')).map((name) => volumeFromDirName(type, name)).sort((a, b) => a.name.localeCompare(b.name));
  }
}

