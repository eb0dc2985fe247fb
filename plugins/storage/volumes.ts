/**
 * Volume work on pools for the instances and images families. An image is unpacked once per pool
 * into an image volume and cloned for each instance. The unpack goes to a scratch volume that is
 * renamed into place only when complete, so an image volume that exists is always whole, even
 * after a crash mid-unpack. Every step that fails removes what the earlier steps made.
 */
import { lstat, mkdir } from 'node:fs/promises';
import path from 'node:path';
import {
  badRequest, canQuota, canRefresh, canReportUsage, canSendReceive, canSnapshot, conflict, unsupportedMessage,
  type OptimizedPart, type PluginContext, type PoolInfo, type StorageDriver, type VolumeRef, type VolumeSendReceive, type VolumeSnapshots, type VolumeSource,
  type CloneOptions, type UnpackProgress, type VolumeState, type VolumeType,
} from '../../sdk/index.js';
import type { InstanceVolumeRecords } from './instance-volumes.js';
import { withPoolDefaults } from './volume-defaults.js';
import type { Readable } from 'node:stream';
import { poolLockKey, type PoolManager } from './pools.js';
import type { SharedLock } from './shared-lock.js';

/** Image volumes are shared by every project: they are named by fingerprint alone. */
const imageVolume = (fingerprint: string, suffix = ''): VolumeRef => ({ type: 'image', project: 'default', name: fingerprint + suffix });
const SCRATCH = '.unpacking';
const imageLockKey = (pool: string, fingerprint: string) => `image/${pool}/${fingerprint}`;
type ImageVolumeSource = Extract<VolumeSource, { kind: 'image' }>;

const without = <T>(map: Record<string, T>, key: string): Record<string, T> => {
  const out = { ...map };
  delete out[key];
  return out;
};

const exists = (dir: string) => lstat(dir).then(() => true, () => false);

/** The driver's snapshot capability, or the family's 400 saying it has none. */
function snapshotsOf(driver: StorageDriver): VolumeSnapshots {
  if (!canSnapshot(driver)) throw badRequest(unsupportedMessage(driver, 'snapshots'));
  return driver.snapshots;
}

/** The driver's optimized backup capability, or the family's 400. */
function sendReceiveOf(driver: StorageDriver): VolumeSendReceive {
  if (!canSendReceive(driver)) throw badRequest(unsupportedMessage(driver, 'optimized backups'));
  return driver.sendReceive;
}

export class VolumeManager {
  /** One unpack at a time per pool and image; later callers wait for it and hear its progress too. */
  private readonly unpacks = new Map<string, { done: Promise<void>; listeners: Set<UnpackProgress> }>();

  constructor(
    private readonly ctx: PluginContext,
    private readonly pools: PoolManager,
    private readonly locks: SharedLock,
    readonly records: InstanceVolumeRecords,
  ) {}

  /** Custom volumes keep their records in the volume API's catalog; every other type here. */
  private recorded = (vol: VolumeRef) => vol.type !== 'custom';

  async volumeState(pool: string, vol: VolumeRef): Promise<VolumeState> {
    return (await this.records.get(pool, vol)).state;
  }

  /** The same for many volumes of one type, in their order (a listing of the pool). */
  volumeStates(pool: string, type: VolumeType, vols: readonly VolumeRef[]): Promise<VolumeState[]> {
    return this.records.states(pool, type, vols);
  }

  /**
   * What a new instance volume carries: what it is given or its copy source's, and the pool's
   * defaults for the keys that leaves out (as the reference fills a moved or copied volume).
   */
  private async newState(info: PoolInfo, vol: VolumeRef, source: VolumeSource, given?: VolumeState): Promise<VolumeState> {
    const kind = vol.type === 'image' ? 'image' : 'instance';
    if (given) return { description: given.description, config: withPoolDefaults(info.config, kind, given.config), snapshots: { ...given.snapshots } };
    if (source.kind === 'copy') {
      const from = await this.volumeState(source.pool, source.volume);
      const base = source.snapshot ? from.snapshots[source.snapshot] ?? from : from;
      const snapshots: VolumeState['snapshots'] = {};
      for (const name of source.snapshots ?? []) if (from.snapshots[name]) snapshots[name] = from.snapshots[name]!;
      // As the reference: the copy takes the config; its description starts empty, its snapshots keep theirs.
      return { description: '', config: withPoolDefaults(info.config, kind, base.config), snapshots };
    }
    return { description: '', config: withPoolDefaults(info.config, kind), snapshots: {} };
  }

  async createInstanceVolume(poolName: string, vol: VolumeRef, source: VolumeSource, state?: VolumeState): Promise<string> {
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
            await this.ensureImage(info, driver, source);
            await this.clone(info, driver, imageVolume(source.fingerprint), vol, undefined, { layered: source.layered });
          });
          break;
        case 'copy':
          await this.copy(info, driver, vol, source);
          break;
        case 'receive': {
          const receiver = sendReceiveOf(driver);
          if (receiver.format !== source.format) {
            throw badRequest(`The backup is in the optimized format of storage driver "${source.format}", which storage pool "${poolName}" (driver "${driver.name}") cannot read`);
          }
          await receiver.receive(info, vol, source.snapshots, source.open, source.prepare);
          break;
        }
        case 'fill':
          await driver.createVolume(info, vol, source.fill);
          try {
            for (const snap of source.snapshots ?? []) await snapshotsOf(driver).create(info, vol, snap.name, snap.fill);
          } catch (err) {
            await driver.deleteVolume(info, vol).catch(() => {});
            throw err;
          }
          break;
      }
      if (this.recorded(vol)) {
        try {
          await this.records.put(poolName, vol, await this.newState(info, vol, source, state));
        } catch (err) {
          await driver.deleteVolume(info, vol).catch(() => {});
          throw err;
        }
      }
      return driver.volumePath(info, vol);
    });
  }

  /**
   * A copy on the same pool uses the driver's clone; across pools the files are copied into a
   * new volume. Snapshots named in the source are recreated on the target, oldest first.
   */
  private async copy(info: PoolInfo, driver: StorageDriver, vol: VolumeRef, source: Extract<VolumeSource, { kind: 'copy' }>): Promise<void> {
    const from = source.pool === info.name ? { info, driver } : await this.pools.usable(source.pool);
    const snapshots = source.snapshots ?? [];
    if (snapshots.length) snapshotsOf(driver);
    const sourcePath = (snapshot?: string) => (snapshot ? snapshotsOf(from.driver).path(from.info, source.volume, snapshot) : from.driver.volumePath(from.info, source.volume));
    if (source.pool === info.name) await this.clone(info, driver, source.volume, vol, source.snapshot);
    else await driver.createVolume(info, vol, (dir) => this.copyTree(sourcePath(source.snapshot), dir));
    try {
      for (const name of snapshots) await snapshotsOf(driver).create(info, vol, name, (dir) => this.copyTree(sourcePath(name), dir));
    } catch (err) {
      await driver.deleteVolume(info, vol).catch(() => {});
      throw err;
    }
  }

  /** Copy the content of `from` into the existing directory `to`, keeping owners, modes, xattrs and links. */
  private async copyTree(from: string, to: string): Promise<void> {
    if (!(await exists(from))) throw badRequest(`The copy source "${path.basename(from)}" does not exist on its pool`);
    await this.ctx.hostTools.run('cp', ['-a', '--reflink=auto', '--no-target-directory', '--', `${from}/.`, to], { timeoutMs: 30 * 60_000, endWithDaemon: true });
  }

  private async withSnapshots<T>(poolName: string, fn: (info: PoolInfo, snaps: VolumeSnapshots) => Promise<T>): Promise<T> {
    return this.locks.shared(poolLockKey(poolName), async () => {
      const { info, driver } = await this.pools.usable(poolName);
      return fn(info, snapshotsOf(driver));
    });
  }

  /** A snapshot keeps the volume's description and config as they were when it was taken. */
  createSnapshot(pool: string, vol: VolumeRef, snapshot: string): Promise<void> {
    return this.withSnapshots(pool, async (info, snaps) => {
      await snaps.create(info, vol, snapshot);
      if (!this.recorded(vol)) return;
      try {
        await this.records.update(pool, vol, (s) => ({ ...s, snapshots: { ...s.snapshots, [snapshot]: { description: s.description, config: { ...s.config } } } }));
      } catch (err) {
        await snaps.delete(info, vol, snapshot).catch(() => {});
        throw err;
      }
    });
  }

  deleteSnapshot(pool: string, vol: VolumeRef, snapshot: string): Promise<void> {
    return this.withSnapshots(pool, async (info, snaps) => {
      await snaps.delete(info, vol, snapshot);
      if (this.recorded(vol)) await this.records.update(pool, vol, (s) => (s.snapshots[snapshot] ? { ...s, snapshots: without(s.snapshots, snapshot) } : undefined));
    });
  }

  renameSnapshot(pool: string, vol: VolumeRef, snapshot: string, newName: string): Promise<void> {
    return this.withSnapshots(pool, async (info, snaps) => {
      await snaps.rename(info, vol, snapshot, newName);
      if (!this.recorded(vol)) return;
      await this.records.update(pool, vol, (s) => {
        const entry = s.snapshots[snapshot];
        return entry ? { ...s, snapshots: { ...without(s.snapshots, snapshot), [newName]: entry } } : undefined;
      });
    });
  }

  restoreSnapshot(pool: string, vol: VolumeRef, snapshot: string): Promise<void> {
    return this.withSnapshots(pool, (info, snaps) => snaps.restore(info, vol, snapshot));
  }

  async snapshotPath(pool: string, vol: VolumeRef, snapshot: string): Promise<string> {
    const { info, driver } = await this.pools.withDriver(pool);
    return snapshotsOf(driver).path(info, vol, snapshot);
  }

  async listSnapshots(pool: string, vol: VolumeRef): Promise<string[]> {
    const { info, driver } = await this.pools.usable(pool);
    return canSnapshot(driver) ? driver.snapshots.list(info, vol) : [];
  }

  /** The snapshot names of many volumes of one type, in their order (one read of the pool where the driver can). */
  async listSnapshotsOfMany(pool: string, type: VolumeType, vols: readonly VolumeRef[]): Promise<string[][]> {
    const { info, driver } = await this.pools.usable(pool);
    if (!canSnapshot(driver) || vols.length === 0) return vols.map(() => []);
    const snaps = driver.snapshots;
    return snaps.listMany ? snaps.listMany(info, type, vols) : Promise.all(vols.map((vol) => snaps.list(info, vol)));
  }

  async snapshotUsage(pool: string, vol: VolumeRef, snapshot: string): Promise<number | undefined> {
    const { info, driver } = await this.pools.usable(pool);
    return snapshotsOf(driver).usage?.(info, vol, snapshot);
  }

  /**
   * Incremental copy into an existing volume: the source snapshots the target lacks are added,
   * then the volume's content is replaced through a scratch snapshot holding the source's
   * current content, so a failure leaves the target as it was.
   */
  async refreshVolume(poolName: string, vol: VolumeRef, source: { pool: string; volume: VolumeRef; snapshots: string[] }): Promise<void> {
    await this.locks.shared(poolLockKey(poolName), async () => {
      const { info, driver } = await this.pools.usable(poolName);
      if (source.pool === poolName && canRefresh(driver)) {
        await driver.refresh.refresh(info, source.volume, vol, source.snapshots);
        await this.recordRefreshed(poolName, vol, source);
        return;
      }
      const snaps = snapshotsOf(driver);
      const from = source.pool === poolName ? { info, driver } : await this.pools.usable(source.pool);
      const fromSnaps = snapshotsOf(from.driver);
      const have = new Set(await snaps.list(info, vol));
      for (const name of source.snapshots) {
        if (!have.has(name)) await snaps.create(info, vol, name, (dir) => this.copyTree(fromSnaps.path(from.info, source.volume, name), dir));
      }
      const scratch = `refresh-${Date.now().toString(36)}`;
      await snaps.create(info, vol, scratch, (dir) => this.copyTree(from.driver.volumePath(from.info, source.volume), dir));
      try {
        await snaps.restore(info, vol, scratch);
      } finally {
        await snaps.delete(info, vol, scratch).catch((err) => this.ctx.log.error({ err }, 'removing a refresh scratch snapshot failed'));
      }
      await this.recordRefreshed(poolName, vol, source);
    });
  }

  /** After a refresh the snapshots it added carry the source's records, as on a copy. */
  private async recordRefreshed(poolName: string, vol: VolumeRef, source: { pool: string; volume: VolumeRef; snapshots: string[] }): Promise<void> {
    if (!this.recorded(vol) || source.snapshots.length === 0) return;
    const from = await this.volumeState(source.pool, source.volume);
    await this.records.update(poolName, vol, (s) => {
      const snapshots = { ...s.snapshots };
      for (const name of source.snapshots) if (from.snapshots[name] && !snapshots[name]) snapshots[name] = from.snapshots[name]!;
      return { ...s, snapshots };
    });
  }

  private async clone(info: PoolInfo, driver: StorageDriver, from: VolumeRef, to: VolumeRef, fromSnapshot?: string, opts?: CloneOptions): Promise<void> {
    try {
      await driver.cloneVolume(info, from, to, fromSnapshot, opts);
    } catch (err) {
      await driver.deleteVolume(info, to).catch((undo) => this.ctx.log.error({ err: undo, volume: to }, 'removing a failed clone failed'));
      throw err;
    }
  }

  private async ensureImage(info: PoolInfo, driver: StorageDriver, source: ImageVolumeSource): Promise<void> {
    const key = imageLockKey(info.name, source.fingerprint);
    let pending = this.unpacks.get(key);
    if (!pending) {
      const listeners = new Set<UnpackProgress>();
      const fanOut: UnpackProgress = (done, total) => {
        for (const listener of listeners) listener(done, total);
      };
      const done = this.unpackOnce(info, driver, source.fingerprint, (dir) => source.unpack(dir, fanOut)).finally(() => this.unpacks.delete(key));
      pending = { done, listeners };
      this.unpacks.set(key, pending);
    }
    const listener = source.onProgress;
    if (listener) pending.listeners.add(listener);
    try {
      await pending.done;
    } finally {
      if (listener) pending.listeners.delete(listener);
    }
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
      await this.records.put(info.name, final, { description: '', config: withPoolDefaults(info.config, 'image'), snapshots: {} });
    } catch (err) {
      await driver.deleteVolume(info, scratch).catch(() => {});
      await driver.deleteVolume(info, final).catch(() => {});
      throw err;
    }
    this.ctx.log.info({ pool: info.name, fingerprint, ms: Date.now() - started }, 'image unpacked into the pool');
  }

  async deleteVolume(poolName: string, vol: VolumeRef): Promise<void> {
    await this.locks.shared(poolLockKey(poolName), async () => {
      const { info, driver } = await this.pools.usable(poolName);
      await driver.deleteVolume(info, vol);
      if (this.recorded(vol)) await this.records.delete(poolName, vol);
    });
  }

  async flattenVolume(poolName: string, vol: VolumeRef): Promise<void> {
    // Drivers that never share files are left alone (an unavailable pool is the start's own failure to report).
    if (!(await this.pools.withDriver(poolName)).driver.flattenVolume) return;
    await this.locks.shared(poolLockKey(poolName), async () => {
      const { info, driver } = await this.pools.usable(poolName);
      await driver.flattenVolume?.(info, vol);
    });
  }

  async renameVolume(poolName: string, vol: VolumeRef, newName: string, newProject?: string): Promise<void> {
    await this.locks.shared(poolLockKey(poolName), async () => {
      const { info, driver } = await this.pools.usable(poolName);
      await driver.renameVolume(info, vol, newName, newProject);
      if (this.recorded(vol)) await this.records.rename(poolName, vol, newName, newProject);
    });
  }

  async volumePath(poolName: string, vol: VolumeRef): Promise<string> {
    const { info, driver } = await this.pools.withDriver(poolName);
    return driver.volumePath(info, vol);
  }

  async volumeUsage(poolName: string, vol: VolumeRef): Promise<number | undefined> {
    const { info, driver } = await this.pools.usable(poolName);
    return canReportUsage(driver) ? driver.volumeUsage(info, vol) : undefined;
  }

  async setVolumeQuota(poolName: string, vol: VolumeRef, bytes: number): Promise<void> {
    await this.locks.shared(poolLockKey(poolName), async () => {
      const { info, driver } = await this.pools.usable(poolName);
      if (canQuota(driver)) await driver.quotas.setQuota(info, vol, bytes);
      // No limit asked: nothing to enforce, on any driver.
      else if (bytes > 0) throw badRequest(unsupportedMessage(driver, 'quotas'));
    });
  }

  async optimizedFormat(poolName: string): Promise<string | undefined> {
    const { driver } = await this.pools.usable(poolName);
    return canSendReceive(driver) ? driver.sendReceive.format : undefined;
  }

  async sendVolume(
    poolName: string, vol: VolumeRef, snapshots: string[], write: (part: OptimizedPart, stream: Readable) => Promise<void>,
    amend?: (dir: string) => Promise<void>,
  ): Promise<unknown> {
    return this.locks.shared(poolLockKey(poolName), async () => {
      const { info, driver } = await this.pools.usable(poolName);
      return sendReceiveOf(driver).send(info, vol, snapshots, write, amend);
    });
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
        await this.records.delete(pool.name, imageVolume(fingerprint));
      }));
    }
  }
}
