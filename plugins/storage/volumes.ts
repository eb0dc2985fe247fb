/**
 * Volume work on pools for the instances and images families. An image is unpacked once per pool
 * into an image volume and cloned for each instance. The unpack goes to a scratch volume that is
 * renamed into place only when complete, so an image volume that exists is always whole, even
 * after a crash mid-unpack. Every step that fails removes what the earlier steps made.
 */
import { lstat, mkdir } from 'node:fs/promises';
import path from 'node:path';
import {
  badRequest, conflict,
  type PluginContext, type PoolInfo, type StorageDriver, type VolumeRef, type VolumeSource, type VolumeType,
} from '../../sdk/index.js';
import { poolLockKey, type PoolManager } from './pools.js';
import type { SharedLock } from './shared-lock.js';

/** Image volumes are shared by every project: they are named by fingerprint alone. */
const imageVolume = (fingerprint: string, suffix = ''): VolumeRef => ({ type: 'image', project: 'default', name: fingerprint + suffix });
const SCRATCH = '.unpacking';
const imageLockKey = (pool: string, fingerprint: string) => `image/${pool}/${fingerprint}`;

const exists = (dir: string) => lstat(dir).then(() => true, () => false);

export class VolumeManager {
  /** One unpack at a time per pool and image; later callers wait for it. */
  private readonly unpacks = new Map<string, Promise<void>>();

  constructor(private readonly ctx: PluginContext, private readonly pools: PoolManager, private readonly locks: SharedLock) {}

  async createInstanceVolume(poolName: string, vol: VolumeRef, source: VolumeSource): Promise<string> {
    return this.locks.shared(poolLockKey(poolName), async () => {
      const { info, driver } = await this.pools.usable(poolName);
      // Checked here so that undoing a failed clone can never remove a volume that was there before.
      if (await exists(driver.volumePath(info, vol))) throw conflict(`Volume "${vol.name}" already exists on storage pool "${poolName}"`);
      switch (source.kind) {
        case 'empty':
          await driver.createVolume(info, vol, (dir) => mkdir(path.join(dir, 'rootfs'), { mode: 0o755 }).then(() => undefined));
          break;
        case 'image':
          await this.locks.shared(imageLockKey(poolName, source.fingerprint), async () => {
            await this.ensureImage(info, driver, source.fingerprint, source.unpack);
            await this.clone(info, driver, imageVolume(source.fingerprint), vol);
          });
          break;
        case 'copy':
          if (source.pool !== poolName) throw badRequest('Copying an instance to another storage pool is not supported by this build yet');
          await this.clone(info, driver, source.volume, vol);
          break;
      }
      return driver.volumePath(info, vol);
    });
  }

  private async clone(info: PoolInfo, driver: StorageDriver, from: VolumeRef, to: VolumeRef): Promise<void> {
    try {
      await driver.cloneVolume(info, from, to);
    } catch (err) {
      await driver.deleteVolume(info, to).catch((undo) => this.ctx.log.error({ err: undo, volume: to }, 'removing a failed clone failed'));
      throw err;
    }
  }

  private ensureImage(info: PoolInfo, driver: StorageDriver, fingerprint: string, unpack: (dir: string) => Promise<void>): Promise<void> {
    const key = imageLockKey(info.name, fingerprint);
    let pending = this.unpacks.get(key);
    if (!pending) {
      pending = this.unpackOnce(info, driver, fingerprint, unpack).finally(() => this.unpacks.delete(key));
      this.unpacks.set(key, pending);
    }
    return pending;
  }

  private async unpackOnce(info: PoolInfo, driver: StorageDriver, fingerprint: string, unpack: (dir: string) => Promise<void>): Promise<void> {
    const final = imageVolume(fingerprint);
    if (await exists(driver.volumePath(info, final))) return;
    const scratch = imageVolume(fingerprint, SCRATCH);
    // A scratch volume left by a crash is incomplete by definition.
    await driver.deleteVolume(info, scratch);
    const started = Date.now();
    await driver.createVolume(info, scratch, unpack);
    try {
      await driver.renameVolume(info, scratch, final.name);
    } catch (err) {
      await driver.deleteVolume(info, scratch).catch(() => {});
      throw err;
    }
    this.ctx.log.info({ pool: info.name, fingerprint, ms: Date.now() - started }, 'image unpacked into the pool');
  }

  async deleteVolume(poolName: string, vol: VolumeRef): Promise<void> {
    await this.locks.shared(poolLockKey(poolName), async () => {
      const { info, driver } = await this.pools.usable(poolName);
      await driver.deleteVolume(info, vol);
    });
  }

  async renameVolume(poolName: string, vol: VolumeRef, newName: string): Promise<void> {
    await this.locks.shared(poolLockKey(poolName), async () => {
      const { info, driver } = await this.pools.usable(poolName);
      await driver.renameVolume(info, vol, newName);
    });
  }

  async volumePath(poolName: string, vol: VolumeRef): Promise<string> {
    const { info, driver } = await this.pools.withDriver(poolName);
    return driver.volumePath(info, vol);
  }

  async volumeUsage(poolName: string, vol: VolumeRef): Promise<number | undefined> {
    const { info, driver } = await this.pools.usable(poolName);
    return driver.volumeUsage?.(info, vol);
  }

  async listVolumes(poolName: string, type: VolumeType): Promise<VolumeRef[]> {
    const { info, driver } = await this.pools.usable(poolName);
    return driver.listVolumes(info, type);
  }

  /** The image is gone: drop its unpacked copies, waiting for clones of it that are under way. */
  async deleteImageVolumes(fingerprint: string): Promise<void> {
    for (const pool of await this.pools.list()) {
      await this.locks.shared(poolLockKey(pool.name), () => this.locks.exclusive(imageLockKey(pool.name, fingerprint), async () => {
        const usable = await this.pools.usable(pool.name).catch(() => undefined);
        if (!usable) return;
        await usable.driver.deleteVolume(usable.info, imageVolume(fingerprint));
        await usable.driver.deleteVolume(usable.info, imageVolume(fingerprint, SCRATCH));
      }));
    }
  }
}
