/**
 * Custom volumes: create (filesystem or block), edit, delete, rename, copy and move within and
 * between pools and projects, refresh copies. Host work goes through the pool's driver; records
 * are written last. Copies land under a scratch name that users cannot pick (`..partial-<name>`)
 * and take their real name only once whole, so a crash leaves either the whole target or a
 * scratch volume that the boot cleanup removes.
 */
import { open } from 'node:fs/promises';
import path from 'node:path';
import {
  badRequest, BLOCK_IMAGE, canQuota, conflict, notFound, parseSize, ProjectsServiceRef,
  type PluginContext, type PoolInfo, type Requestor, type StorageDriver, type VolumeRef, type VolumeSource,
} from '../../../sdk/index.js';
import { poolLockKey, type PoolManager } from '../pools.js';
import type { SharedLock } from '../shared-lock.js';
import { withPoolDefaults } from '../volume-defaults.js';
import type { VolumeManager } from '../volumes.js';
import type { VolumeCatalog } from './catalog.js';
import { checkVolumeName } from './names.js';
import { volumeUrl, type ContentType, type CustomVolumeRecord } from './record.js';
import type { VolumeUsers } from './users.js';

/** Block volumes without a `size` (nor the pool's `volume.size`) get this, as the reference does. */
export const DEFAULT_BLOCK_SIZE = '10GiB';
export const PARTIAL_PREFIX = '..partial-';
/** How long a delete, rename or move waits for a migration of the volume to end before it is refused. */
const MIGRATION_WAIT_MS = 5_000;

export interface NewVolume {
  name: string;
  description: string;
  config: Record<string, string>;
  contentType: ContentType;
}

export interface CopySource {
  pool: string;
  project: string;
  name: string;
  volumeOnly: boolean;
  refresh: boolean;
}

export const customRef = (project: string, name: string): VolumeRef => ({ type: 'custom', project, name });
/** Where a new volume is made before it takes its real name. */
export const scratchRef = (project: string, name: string): VolumeRef => customRef(project, PARTIAL_PREFIX + name);

export function contentTypeOf(value: unknown): ContentType {
  if (value === undefined || value === null || value === '' || value === 'filesystem' || value === 'fs') return 'filesystem';
  if (value === 'block') return 'block';
  throw badRequest(`Invalid content type "${String(value)}" (use "filesystem" or "block")`);
}

export class CustomVolumes {
  /** What goes with a volume (its backups) when it is renamed or moved (`to`) or deleted (no `to`). */
  followers: ((from: { pool: string; project: string; name: string }, to?: { pool: string; project: string; name: string }) => Promise<void>)[] = [];

  private async follow(from: { pool: string; project: string; name: string }, to?: { pool: string; project: string; name: string }): Promise<void> {
    for (const f of this.followers) await f(from, to);
  }

  /** Names being created right now (pool/project/name): a second create waits for none, it gets a 409. */
  private readonly reserved = new Set<string>();
  /** Volumes being migrated (pool/project/name, with a count): not to be deleted, renamed or moved meanwhile. */
  private readonly migrating = new Map<string, number>();

  constructor(
    private readonly ctx: PluginContext,
    private readonly pools: PoolManager,
    private readonly volumes: VolumeManager,
    private readonly locks: SharedLock,
    readonly catalog: VolumeCatalog,
    private readonly users: VolumeUsers,
  ) {}

  /** The record or a 404. */
  get(project: string, pool: string, name: string) {
    const entry = this.catalog.find(project, pool, name);
    if (!entry) throw notFound(`Storage volume "${name}" not found on pool "${pool}"`);
    return entry;
  }

  private checkConfig(config: Record<string, string>, contentType: ContentType): void {
    this.ctx.keys.validate('volume', config);
    if (contentType === 'block') {
      for (const key of ['security.shifted', 'security.unmapped']) {
        if (config[key] !== undefined) throw badRequest(`"${key}" does not apply to block volumes`);
      }
    } else if (config['security.shared'] !== undefined) {
      throw badRequest('"security.shared" applies to block volumes only');
    }
  }

  private async vet(project: string, pool: string, name: string, config: Record<string, string>): Promise<void> {
    await this.ctx.services.get(ProjectsServiceRef)?.vet({
      kind: 'volume', project, pool, name, size: config.size ? parseSize(config.size) : undefined,
    });
  }

  /** Hold a name for the length of a creation so two requests cannot both make it. */
  private async reserving<T>(project: string, pool: string, name: string, fn: () => Promise<T>): Promise<T> {
    const key = `${pool}\u0000${project}\u0000${name}`;
    if (this.reserved.has(key) || this.catalog.find(project, pool, name)) throw conflict(`Storage volume "${name}" already exists on pool "${pool}"`);
    this.reserved.add(key);
    try {
      return await fn();
    } finally {
      this.reserved.delete(key);
    }
  }

  async create(poolName: string, project: string, vol: NewVolume, requestor?: Requestor): Promise<void> {
    checkVolumeName(vol.name);
    const { info } = await this.pools.usable(poolName);
    const config = withPoolDefaults(info.config, vol.contentType === 'block' ? 'custom-block' : 'custom-filesystem', vol.config);
    for (const [k, v] of Object.entries(config)) if (v === '') delete config[k];
    this.checkConfig(config, vol.contentType);
    if (vol.contentType === 'block' && !config.size) config.size = DEFAULT_BLOCK_SIZE;
    await this.vet(project, poolName, vol.name, config);
    await this.reserving(project, poolName, vol.name, async () => {
      await this.locks.shared(poolLockKey(poolName), async () => {
        const { info: pool, driver } = await this.pools.usable(poolName);
        const ref = customRef(project, vol.name);
        await driver.createVolume(pool, ref, vol.contentType === 'block' ? (dir) => makeBlockFile(dir, parseSize(config.size!)) : undefined);
        try {
          // `size` is a quota where the driver has them; dir takes it and enforces nothing, as the reference.
          if (vol.contentType !== 'block' && config.size && canQuota(driver)) await driver.quotas.setQuota(pool, ref, parseSize(config.size));
          await this.catalog.put(project, {
            pool: poolName, name: vol.name, description: vol.description, config, contentType: vol.contentType, createdAt: new Date().toISOString(),
          }, 0);
        } catch (err) {
          await driver.deleteVolume(pool, ref).catch(() => {});
          throw err;
        }
      });
    });
    this.ctx.events.lifecycle('storage-volume-created', volumeUrl(poolName, 'custom', vol.name, project), { project, requestor });
  }

  async update(poolName: string, project: string, name: string, edit: { description: string; config: Record<string, string> }, expectedRev: number | undefined, requestor?: Requestor): Promise<void> {
    const entry = this.get(project, poolName, name);
    const config = { ...edit.config };
    for (const [k, v] of Object.entries(config)) if (v === '') delete config[k];
    this.checkConfig(config, entry.doc.contentType);
    if (entry.doc.contentType === 'block' && config.size !== entry.doc.config.size) {
      // A block volume's file is made once; growing it in place is not offered by the dir driver.
      throw badRequest('The size of a block volume cannot be changed on this pool');
    }
    for (const key of ['security.shifted', 'security.unmapped']) {
      if ((config[key] ?? 'false') !== (entry.doc.config[key] ?? 'false') && (await this.users.usersOf(project, poolName, name)).length) {
        throw badRequest(`"${key}" cannot be changed while the volume is attached`);
      }
    }
    const resized = entry.doc.contentType !== 'block' && config.size !== entry.doc.config.size;
    if (config.size !== entry.doc.config.size) await this.vet(project, poolName, name, config);
    if (resized) await this.applyQuota(poolName, project, name, config.size);
    try {
      await this.catalog.put(project, { ...entry.doc, description: edit.description, config }, expectedRev ?? entry.rev);
    } catch (err) {
      if (resized) await this.applyQuota(poolName, project, name, entry.doc.config.size).catch(() => {});
      throw err;
    }
    this.ctx.events.lifecycle('storage-volume-updated', volumeUrl(poolName, 'custom', name, project), { project, requestor });
  }

  /** A filesystem volume's `size` as a quota (none when unset) where the pool's driver has quotas; ignored elsewhere. */
  private async applyQuota(poolName: string, project: string, name: string, size: string | undefined): Promise<void> {
    const { driver } = await this.pools.usable(poolName);
    if (!canQuota(driver)) return;
    await this.volumes.setVolumeQuota(poolName, customRef(project, name), size ? parseSize(size) : 0);
  }

  /** Run `fn` (a send to, or a refresh from, another server) with the volume held against delete, rename and move. */
  async whileMigrating<T>(project: string, pool: string, name: string, fn: () => Promise<T>): Promise<T> {
    const key = `${pool}\u0000${project}\u0000${name}`;
    this.migrating.set(key, (this.migrating.get(key) ?? 0) + 1);
    try {
      return await fn();
    } finally {
      const left = (this.migrating.get(key) ?? 1) - 1;
      if (left > 0) this.migrating.set(key, left);
      else this.migrating.delete(key);
    }
  }

  /**
   * A migration about to end is waited for: `lxc storage volume move` across servers deletes the
   * source as soon as the target is done, while the source may still be reading the target's last
   * word. One that goes on longer is a 409.
   */
  async awaitMigration(project: string, pool: string, name: string, doing: string): Promise<void> {
    const key = `${pool}\u0000${project}\u0000${name}`;
    for (const until = Date.now() + MIGRATION_WAIT_MS; this.migrating.has(key) && Date.now() < until;) await new Promise((r) => setTimeout(r, 100));
    if (this.migrating.has(key)) throw conflict(`Storage volume "${name}" cannot be ${doing} while it is being migrated`);
  }

  /** Refuses while anything uses the volume, naming the users. */
  private async refuseInUse(project: string, pool: string, name: string, doing: string): Promise<void> {
    await this.awaitMigration(project, pool, name, doing);
    const users = await this.users.usersOf(project, pool, name);
    if (users.length) throw badRequest(`Storage volume "${name}" cannot be ${doing} while in use by ${users.join(', ')}`);
  }

  async delete(poolName: string, project: string, name: string, requestor?: Requestor): Promise<void> {
    this.get(project, poolName, name);
    await this.refuseInUse(project, poolName, name, 'deleted');
    await this.locks.shared(poolLockKey(poolName), async () => {
      const { info, driver } = await this.pools.usable(poolName);
      // Record first: a crash in between leaves a host volume without a record, which boot removes.
      await this.catalog.delete(project, poolName, name);
      await driver.deleteVolume(info, customRef(project, name));
    });
    await this.follow({ pool: poolName, project, name });
    this.ctx.events.lifecycle('storage-volume-deleted', volumeUrl(poolName, 'custom', name, project), { project, requestor });
  }

  /** Rename on the same pool, possibly into another project (the driver moves the directory). */
  async rename(poolName: string, project: string, name: string, to: { name: string; project: string }, requestor?: Requestor): Promise<void> {
    checkVolumeName(to.name);
    const entry = this.get(project, poolName, name);
    if (to.name === name && to.project === project) return;
    await this.refuseInUse(project, poolName, name, 'renamed');
    if (to.project !== project) await this.vet(to.project, poolName, to.name, entry.doc.config);
    await this.reserving(to.project, poolName, to.name, async () => {
      await this.volumes.renameVolume(poolName, customRef(project, name), to.name, to.project === project ? undefined : to.project);
      try {
        await this.catalog.move({ project, pool: poolName, name }, { project: to.project, pool: poolName, name: to.name });
      } catch (err) {
        await this.volumes.renameVolume(poolName, customRef(to.project, to.name), name, to.project === project ? undefined : project).catch(() => {});
        throw err;
      }
    });
    await this.follow({ pool: poolName, project, name }, { pool: poolName, project: to.project, name: to.name });
    this.ctx.events.lifecycle('storage-volume-renamed', volumeUrl(poolName, 'custom', to.name, to.project), {
      project: to.project, requestor, context: { old_name: name },
    });
  }

  /**
   * Copy `source` into `poolName`/`project`/`name`. With `refresh` and an existing target, only
   * what changed is brought over (snapshots it lacks, then the content).
   */
  async copy(poolName: string, project: string, target: { name: string; description?: string; config?: Record<string, string> }, source: CopySource, requestor?: Requestor): Promise<void> {
    checkVolumeName(target.name);
    // `<volume>/<snapshot>` copies one snapshot's content into a new volume without snapshots.
    const [sourceVolume, fromSnapshot] = source.name.split('/') as [string, string | undefined];
    source = { ...source, name: sourceVolume };
    const src = this.get(source.project, source.pool, source.name);
    if (fromSnapshot !== undefined && !this.catalog.findSnapshot(source.project, source.pool, source.name, fromSnapshot)) {
      throw notFound(`Snapshot "${fromSnapshot}" of storage volume "${source.name}" not found`);
    }
    const snapshots = source.volumeOnly || fromSnapshot !== undefined ? [] : this.catalog.snapshotsOf(source.project, source.pool, source.name).map((s) => s.doc);
    const existing = this.catalog.find(project, poolName, target.name);
    if (existing && source.refresh) {
      await this.refresh(poolName, project, target.name, source, snapshots.map((s) => s.name));
      this.ctx.events.lifecycle('storage-volume-updated', volumeUrl(poolName, 'custom', target.name, project), { project, requestor });
      return;
    }
    // As the reference: the target pool's volume.* defaults fill what the source's config leaves out.
    const { info: targetPool } = await this.pools.usable(poolName);
    const kind = src.doc.contentType === 'block' ? 'custom-block' : 'custom-filesystem';
    const config = withPoolDefaults(targetPool.config, kind, { ...src.doc.config, ...(target.config ?? {}) });
    for (const [k, v] of Object.entries(config)) if (v === '') delete config[k];
    this.checkConfig(config, src.doc.contentType);
    await this.vet(project, poolName, target.name, config);
    await this.reserving(project, poolName, target.name, async () => {
      const scratch = customRef(project, PARTIAL_PREFIX + target.name);
      // A scratch copy left by an earlier failure of this same target is incomplete by definition.
      await this.volumes.deleteVolume(poolName, scratch).catch(() => {});
      await this.volumes.createInstanceVolume(poolName, scratch, {
        kind: 'copy', pool: source.pool, volume: customRef(source.project, source.name), snapshot: fromSnapshot, snapshots: snapshots.map((s) => s.name),
      });
      try {
        await this.volumes.renameVolume(poolName, scratch, target.name);
      } catch (err) {
        await this.volumes.deleteVolume(poolName, scratch).catch(() => {});
        throw err;
      }
      try {
        if (src.doc.contentType !== 'block' && config.size) await this.applyQuota(poolName, project, target.name, config.size);
        await this.catalog.put(project, {
          pool: poolName, name: target.name, description: target.description ?? src.doc.description, config,
          contentType: src.doc.contentType, createdAt: new Date().toISOString(),
        }, 0);
        for (const snap of snapshots) await this.catalog.putSnapshot(project, { ...snap, pool: poolName, volume: target.name });
      } catch (err) {
        await this.catalog.delete(project, poolName, target.name).catch(() => {});
        await this.volumes.deleteVolume(poolName, customRef(project, target.name)).catch(() => {});
        throw err;
      }
    });
    this.ctx.events.lifecycle('storage-volume-created', volumeUrl(poolName, 'custom', target.name, project), { project, requestor });
  }

  private async refresh(poolName: string, project: string, name: string, source: CopySource, snapshots: string[]): Promise<void> {
    const target = this.get(project, poolName, name);
    if (target.doc.contentType !== this.get(source.project, source.pool, source.name).doc.contentType) {
      throw badRequest('A refresh copy needs source and target of the same content type');
    }
    const had = new Set(this.catalog.snapshotsOf(project, poolName, name).map((s) => s.doc.name));
    await this.volumes.refreshVolume(poolName, customRef(project, name), { pool: source.pool, volume: customRef(source.project, source.name), snapshots });
    for (const snap of this.catalog.snapshotsOf(source.project, source.pool, source.name)) {
      if (!snapshots.includes(snap.doc.name) || had.has(snap.doc.name)) continue;
      await this.catalog.putSnapshot(project, { ...snap.doc, pool: poolName, volume: name });
    }
  }

  /** Move to another pool (and maybe project and name): a whole copy, then the source goes. */
  async move(poolName: string, project: string, name: string, to: { pool: string; project: string; name: string }, requestor?: Requestor): Promise<void> {
    if (to.pool === poolName) return this.rename(poolName, project, name, { name: to.name, project: to.project }, requestor);
    await this.pools.usable(to.pool);
    await this.refuseInUse(project, poolName, name, 'moved');
    await this.copy(to.pool, to.project, { name: to.name }, { pool: poolName, project, name, volumeOnly: false, refresh: false }, requestor);
    try {
      await this.locks.shared(poolLockKey(poolName), async () => {
        const { info, driver } = await this.pools.usable(poolName);
        await this.catalog.delete(project, poolName, name);
        await driver.deleteVolume(info, customRef(project, name));
      });
    } catch (err) {
      this.ctx.log.error({ err, pool: poolName, volume: name }, 'removing a moved volume from its old pool failed');
      throw err;
    }
    await this.follow({ pool: poolName, project, name }, to);
    this.ctx.events.lifecycle('storage-volume-deleted', volumeUrl(poolName, 'custom', name, project), { project, requestor });
  }

  /** Everything a new volume from outside (a backup) is checked for before any work starts: name, config, project limits, a free name. */
  async checkNew(poolName: string, project: string, name: string, config: Record<string, string>, contentType: ContentType): Promise<void> {
    checkVolumeName(name);
    this.checkConfig(config, contentType);
    await this.pools.usable(poolName);
    if (this.catalog.find(project, poolName, name)) throw conflict(`Storage volume "${name}" already exists on pool "${poolName}"`);
    await this.vet(project, poolName, name, config);
  }

  /**
   * A new volume from a backup import: written by a `fill` source (snapshots filled first, oldest
   * first) or received from the pool driver's own streams. Made under the scratch name and renamed
   * once whole; the records are written last.
   */
  async createFilled(
    poolName: string, project: string, vol: NewVolume, source: Extract<VolumeSource, { kind: 'fill' | 'receive' }>,
    snapshots: { name: string; description: string; expiresAt: string; createdAt?: string; config?: Record<string, string> }[],
    requestor?: Requestor,
    /** Work on the whole scratch volume before it takes its name (a migration receives into it and snapshots it there). */
    thenInScratch?: (scratch: VolumeRef) => Promise<void>,
  ): Promise<void> {
    // As the reference: the pool's volume.* defaults fill what the archive's config leaves out.
    const { info } = await this.pools.usable(poolName);
    vol = { ...vol, config: withPoolDefaults(info.config, vol.contentType === 'block' ? 'custom-block' : 'custom-filesystem', vol.config) };
    await this.checkNew(poolName, project, vol.name, vol.config, vol.contentType);
    await this.reserving(project, poolName, vol.name, async () => {
      const scratch = scratchRef(project, vol.name);
      await this.volumes.deleteVolume(poolName, scratch).catch(() => {});
      await this.volumes.createInstanceVolume(poolName, scratch, source);
      try {
        await thenInScratch?.(scratch);
        await this.volumes.renameVolume(poolName, scratch, vol.name);
      } catch (err) {
        await this.volumes.deleteVolume(poolName, scratch).catch(() => {});
        throw err;
      }
      const now = new Date().toISOString();
      try {
        if (vol.contentType !== 'block' && vol.config.size) await this.applyQuota(poolName, project, vol.name, vol.config.size);
        await this.catalog.put(project, { pool: poolName, name: vol.name, description: vol.description, config: vol.config, contentType: vol.contentType, createdAt: now }, 0);
        for (const s of snapshots) {
          await this.catalog.putSnapshot(project, {
            pool: poolName, volume: vol.name, name: s.name, description: s.description, config: s.config ?? {}, contentType: vol.contentType,
            createdAt: s.createdAt ?? now, expiresAt: s.expiresAt,
          }, 0);
        }
      } catch (err) {
        await this.catalog.delete(project, poolName, vol.name).catch(() => {});
        await this.volumes.deleteVolume(poolName, customRef(project, vol.name)).catch(() => {});
        throw err;
      }
    });
    this.ctx.events.lifecycle('storage-volume-created', volumeUrl(poolName, 'custom', vol.name, project), { project, requestor });
  }

  /** Host path where the volume's files are (filesystem volumes) or its block file's directory. */
  async path(poolName: string, project: string, name: string): Promise<string> {
    return this.volumes.volumePath(poolName, customRef(project, name));
  }

  async usage(poolName: string, project: string, name: string): Promise<number | undefined> {
    return this.volumes.volumeUsage(poolName, customRef(project, name));
  }

  /**
   * Boot: scratch copies left by a crash are removed; a whole volume without a record (a crash
   * between the last rename and the record write) is adopted; records whose volume is gone are dropped.
   */
  async recover(): Promise<void> {
    await this.catalog.load();
    for (const pool of await this.pools.list()) {
      const usable = await this.pools.usable(pool.name).catch(() => undefined);
      if (!usable) continue;
      const { info, driver } = usable;
      // A pool whose volumes cannot be listed is left alone: its records must not look orphaned.
      const onHost = await driver.listVolumes(info, 'custom').catch(() => undefined);
      if (!onHost) continue;
      const present = new Set<string>();
      for (const ref of onHost) {
        if (ref.name.startsWith(PARTIAL_PREFIX)) {
          this.ctx.log.warn({ pool: pool.name, volume: ref }, 'removing an incomplete volume copy left by a crash');
          await driver.deleteVolume(info, ref).catch((err) => this.ctx.log.error({ err }, 'removing a leftover copy failed'));
          continue;
        }
        present.add(`${ref.project}\u0000${ref.name}`);
        if (!this.catalog.find(ref.project, pool.name, ref.name)) {
          this.ctx.log.warn({ pool: pool.name, volume: ref }, 'adopting a custom volume that has no record');
          await this.catalog.put(ref.project, {
            pool: pool.name, name: ref.name, description: '', config: {},
            contentType: await guessContentType(driver, info, ref), createdAt: new Date().toISOString(),
          }).catch((err) => this.ctx.log.error({ err }, 'adopting a volume failed'));
        }
      }
      for (const entry of this.catalog.list(pool.name)) {
        if (present.has(`${entry.project}\u0000${entry.doc.name}`)) continue;
        this.ctx.log.warn({ pool: pool.name, volume: entry.doc.name, project: entry.project }, 'dropping the record of a custom volume that is gone');
        await this.catalog.delete(entry.project, pool.name, entry.doc.name).catch(() => {});
      }
    }
  }
}

/** A sparse file of `bytes`: space is only taken as the instance writes. */
async function makeBlockFile(dir: string, bytes: number): Promise<void> {
  const handle = await open(path.join(dir, BLOCK_IMAGE), 'wx', 0o600);
  try {
    await handle.truncate(bytes);
  } finally {
    await handle.close();
  }
}

async function guessContentType(driver: StorageDriver, pool: PoolInfo, ref: VolumeRef): Promise<ContentType> {
  const file = path.join(driver.volumePath(pool, ref), BLOCK_IMAGE);
  return (await open(file, 'r').then(async (h) => { await h.close(); return true; }, () => false)) ? 'block' : 'filesystem';
}
