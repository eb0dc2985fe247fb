/**
 * Pool records and what changes them. Records are cached (this plugin is their only writer; the
 * store's change feed drops stale entries) because every instance lookup asks for its pool.
 * Creation runs the driver first and writes the record last, so a crash in between leaves at
 * most an empty pool layout that the driver accepts as empty next time; deletion refuses while
 * anything uses the pool and removes the record only once the driver has cleaned up.
 */
import {
  badRequest, conflict, notFound,
  type Collection, type PluginContext, type PoolInfo, type Requestor, type StorageDriver, type UsedByRegistry,
} from '../../sdk/index.js';
import type { DriverTable } from './drivers.js';
import { keepFixedKeys } from './keys.js';
import { clusterStatus, type MemberParts } from '../../sdk/lib/cluster/index.js';
import { changedKeys, POOL_PROJECT, poolInfo, poolUrl, type PoolRecord, type PoolStatus } from './pool.js';
import { poolParts } from './member-parts.js';
import type { SharedLock } from './shared-lock.js';

export interface PoolEdit {
  description: string;
  config: Record<string, string>;
}

interface Availability {
  status: PoolStatus;
  reason?: string;
}

const UNAVAILABLE_WARNING = 'Storage pool unavailable';

/** A pool defined on other members first must have been defined with the same driver. */
const sameDriver = (body: PoolRecord) => (defined: PoolRecord) => {
  if (defined.driver !== body.driver) throw badRequest(`Storage pool "${body.name}" is defined with driver "${defined.driver}", not "${body.driver}"`);
};

export const poolLockKey = (name: string) => `pool/${name}`;

export class PoolManager {
  readonly records: Collection<PoolRecord>;
  private readonly cache = new Map<string, { rev: number; doc: PoolRecord }>();
  private loaded: Promise<void> | undefined;
  private readonly availability = new Map<string, Availability>();
  private readonly reserved = new Set<string>();
  /** Pool name -> driver name, kept apart from the cache so GET /1.0 can read it synchronously. */
  private readonly driverOf = new Map<string, string>();

  constructor(
    private readonly ctx: PluginContext,
    private readonly drivers: DriverTable,
    private readonly locks: SharedLock,
    readonly usedBy: UsedByRegistry,
  ) {
    this.records = ctx.store.collection<PoolRecord>('pools');
    ctx.store.onChange((change) => {
      if (change.collection === 'pools') this.cache.delete(change.name);
    });
    this.parts = poolParts(ctx, this, drivers);
  }

  /** A cluster's pools: defined and made member by member. */
  readonly parts: MemberParts<PoolRecord>;

  /** This member's name in a cluster; undefined standalone (records then hold every key). */
  private member(): string | undefined {
    return this.ctx.cluster.enabled ? this.ctx.cluster.serverName : undefined;
  }

  /** The pool as this server's driver sees it. */
  info(doc: PoolRecord): PoolInfo {
    return poolInfo(doc, this.member());
  }

  /** @internal This member's part was just made (MemberParts). */
  markCreated(name: string): void {
    this.availability.set(name, { status: 'Created' });
    this.ctx.refreshServerInfo();
  }

  /** @internal This member's part was just removed (MemberParts). */
  forget(name: string): void {
    this.cache.delete(name);
    this.driverOf.delete(name);
    this.availability.delete(name);
    this.ctx.refreshServerInfo();
  }

  private async load(): Promise<void> {
    this.loaded ??= (async () => {
      for (const stored of await this.records.list(POOL_PROJECT)) {
        this.cache.set(stored.name, { rev: stored.rev, doc: stored.doc });
        this.driverOf.set(stored.name, stored.doc.driver);
      }
    })().catch((err) => {
      this.loaded = undefined;
      throw err;
    });
    await this.loaded;
  }

  async find(name: string): Promise<{ rev: number; doc: PoolRecord } | undefined> {
    await this.load();
    let entry = this.cache.get(name);
    if (!entry) {
      const stored = await this.records.get(POOL_PROJECT, name);
      if (!stored) return undefined;
      entry = { rev: stored.rev, doc: stored.doc };
      this.cache.set(name, entry);
    }
    return entry;
  }

  async get(name: string): Promise<{ rev: number; doc: PoolRecord }> {
    const found = await this.find(name);
    if (!found) throw notFound('Storage pool not found');
    return found;
  }

  /** The stored record, read past the cache. */
  private async fresh(name: string): Promise<{ rev: number; doc: PoolRecord }> {
    const stored = await this.records.get(POOL_PROJECT, name);
    if (!stored) throw notFound('Storage pool not found');
    return stored;
  }

  async list(): Promise<PoolRecord[]> {
    await this.load();
    return (await this.records.list(POOL_PROJECT)).map((s) => s.doc);
  }

  /** Driver names of the existing pools, for `environment.storage` (must be synchronous). */
  driversInUse(): string[] {
    return [...new Set(this.driverOf.values())].sort();
  }

  status(name: string, doc?: PoolRecord): PoolStatus {
    const local = this.availability.get(name)?.status;
    if (local === 'Unavailable' || !doc?.members) return local ?? 'Created';
    return clusterStatus(doc);
  }

  /** A pool volume work may use: 404 when absent, 400 when unavailable. */
  async usable(name: string): Promise<{ info: PoolInfo; driver: StorageDriver }> {
    const { doc } = await this.get(name);
    const driver = this.drivers.get(doc.driver);
    const state = this.availability.get(name);
    if (!driver || state?.status === 'Unavailable') {
      throw badRequest(`Storage pool "${name}" is unavailable: ${state?.reason ?? `storage driver "${doc.driver}" is not enabled in this build`}`);
    }
    const member = this.member();
    if (member !== undefined && doc.members?.[member]?.state !== 'Created') {
      throw badRequest(`Storage pool "${name}" is not created on this member (${member}) yet`);
    }
    return { info: this.info(doc), driver };
  }

  /** The pool's driver even when the pool could not be mounted (paths stay computable). */
  async withDriver(name: string): Promise<{ info: PoolInfo; driver: StorageDriver }> {
    const { doc } = await this.get(name);
    const driver = this.drivers.get(doc.driver);
    if (!driver) throw badRequest(`Storage pool "${name}" is unavailable: storage driver "${doc.driver}" is not enabled in this build`);
    return { info: this.info(doc), driver };
  }

  /** `target`: in a cluster, define only that member's part (the kernel forwarded the request to it). */
  async create(body: PoolRecord, requestor?: Requestor, target?: string): Promise<void> {
    if (this.member() !== undefined) {
      if (target) {
        this.drivers.require(body.driver);
        await this.parts.define(POOL_PROJECT, body, sameDriver(body));
        return;
      }
      await this.parts.createEverywhere(POOL_PROJECT, body, sameDriver(body));
      this.ctx.events.lifecycle('storage-pool-created', poolUrl(body.name), { project: 'default', requestor });
      return;
    }
    const driver = this.drivers.require(body.driver);
    if (this.reserved.has(body.name) || (await this.find(body.name))) throw conflict(`Storage pool "${body.name}" already exists`);
    this.drivers.validate(body.driver, body.config);
    this.reserved.add(body.name);
    try {
      await this.locks.exclusive(poolLockKey(body.name), async () => {
        const info: PoolInfo = { name: body.name, driver: body.driver, config: { ...body.config } };
        driver.fillDefaults?.(info, this.ctx.dataDir);
        await driver.create(info);
        try {
          const record: PoolRecord = { name: body.name, driver: body.driver, description: body.description, config: info.config };
          const stored = await this.records.put(POOL_PROJECT, body.name, record, 0);
          this.cache.set(body.name, { rev: stored.rev, doc: stored.doc });
          this.driverOf.set(body.name, body.driver);
        } catch (err) {
          await driver.delete(info).catch((undo) => this.ctx.log.error({ err: undo, pool: body.name }, 'undoing a pool creation failed'));
          throw err;
        }
        this.availability.set(body.name, { status: 'Created' });
      });
    } finally {
      this.reserved.delete(body.name);
    }
    this.ctx.refreshServerInfo();
    this.ctx.events.lifecycle('storage-pool-created', poolUrl(body.name), { project: 'default', requestor });
  }

  /**
   * In a cluster, without `target` the shared keys change on every member (each member's driver takes
   * them); with it (the kernel forwarded the request to that member) only that member's own keys change.
   */
  async update(name: string, edit: PoolEdit, requestor?: Requestor, target?: string): Promise<void> {
    await this.locks.exclusive(poolLockKey(name), async () => {
      const { rev, doc } = await this.get(name);
      if (doc.members) {
        // The edits read the record afresh: the pool cache may not have followed another member's write yet.
        if (target) await this.updateOwnPart(name, edit);
        else await this.updateShared(name, edit);
        this.cache.delete(name);
        return;
      }
      const config = keepFixedKeys(edit.config, doc.config);
      // An empty value unsets the key.
      for (const [key, value] of Object.entries(config)) if (value === '') delete config[key];
      this.drivers.validate(doc.driver, config);
      await this.driverTakes(name, doc.driver, config, changedKeys(doc.config, config));
      const stored = await this.records.put(POOL_PROJECT, name, { ...doc, description: edit.description, config }, rev);
      this.cache.set(name, { rev: stored.rev, doc: stored.doc });
    });
    this.ctx.events.lifecycle('storage-pool-updated', poolUrl(name), { project: 'default', requestor });
  }

  /** The live pool takes a change of its config before it is stored (a driver without `update` takes it at next mount). */
  private async driverTakes(name: string, driverName: string, config: Record<string, string>, changed: Record<string, string>): Promise<void> {
    const driver = this.drivers.get(driverName);
    if (!driver?.update || !Object.keys(changed).length) return;
    const { info } = await this.usable(name);
    await driver.update({ ...info, config }, changed);
  }

  /** The shared keys of a cluster's pool: every member's driver takes the change, or none keeps it. */
  private async updateShared(name: string, edit: PoolEdit): Promise<void> {
    const stored = await this.fresh(name);
    const config = this.parts.sharedKeysOf(edit.config);
    this.drivers.validate(stored.doc.driver, config);
    await this.parts.editEverywhere(POOL_PROJECT, name, { description: edit.description, config }, stored.rev);
  }

  /** `--target`: this member's own keys (a loop file's `size`...); shared keys must be left as they are. */
  private async updateOwnPart(name: string, edit: PoolEdit): Promise<void> {
    const self = this.ctx.cluster.serverName;
    const stored = await this.fresh(name);
    const { doc } = stored;
    const part = doc.members?.[self];
    if (!part) throw badRequest(`Storage pool "${name}" is not defined on member "${self}"`);
    const own = this.parts.ownKeysOf(doc, edit.config);
    if (part.state !== 'Created') {
      // Not made on this host yet (pending, or failed): the keys are what its making will use.
      this.drivers.validate(doc.driver, own);
      await this.records.put(POOL_PROJECT, name, { ...doc, members: { ...doc.members, [self]: { ...part, config: own } } }, stored.rev);
      return;
    }
    const kept = keepFixedKeys(own, part.config);
    const config = { ...doc.config, ...kept };
    this.drivers.validate(doc.driver, config);
    await this.driverTakes(name, doc.driver, config, changedKeys(part.config, kept));
    await this.records.put(POOL_PROJECT, name, { ...doc, members: { ...doc.members, [self]: { ...part, config: kept } } }, stored.rev);
  }

  async delete(name: string, requestor?: Requestor): Promise<void> {
    await this.locks.exclusive(poolLockKey(name), async () => {
      const { rev, doc } = await this.get(name);
      if ((await this.usedBy.collect('default', name)).length > 0) throw badRequest('The storage pool is currently in use');
      const driver = this.drivers.get(doc.driver);
      if (!driver) throw badRequest(`Storage pool "${name}" cannot be deleted: storage driver "${doc.driver}" is not enabled in this build`);
      if (doc.members) {
        await this.parts.deleteEverywhere(POOL_PROJECT, name);
        this.forget(name);
        return;
      }
      await driver.delete(poolInfo(doc));
      await this.records.delete(POOL_PROJECT, name, rev);
      this.cache.delete(name);
      this.driverOf.delete(name);
      this.availability.delete(name);
    });
    await this.ctx.warnings.resolve(UNAVAILABLE_WARNING, poolUrl(name));
    this.ctx.refreshServerInfo();
    this.ctx.events.lifecycle('storage-pool-deleted', poolUrl(name), { project: 'default', requestor });
  }

  /** Shutdown: drivers that mount something undo it (a running instance keeps its own mount namespace's hold). */
  async unmountAll(): Promise<void> {
    const pools = await this.list().catch(() => []);
    await Promise.all(pools.map(async (pool) => {
      const driver = this.drivers.get(pool.driver);
      if (!driver?.unmount || this.status(pool.name) === 'Unavailable') return;
      await driver.unmount(this.info(pool)).catch((err) => this.ctx.log.warn({ err, pool: pool.name }, 'unmounting a storage pool failed'));
    }));
  }

  /** Boot: make every pool usable; one that cannot be is reported unavailable and the daemon goes on. */
  async mountAll(): Promise<void> {
    const pools = await this.list();
    const member = this.member();
    await Promise.all(pools.map(async (pool) => {
      const driver = this.drivers.get(pool.driver);
      // A cluster's pool this member has not made yet is made by MemberParts, not mounted.
      if (member !== undefined && pool.members?.[member]?.state !== 'Created') {
        await this.parts.reconcile(POOL_PROJECT, pool.name).catch((err) => this.ctx.log.error({ err, pool: pool.name }, 'making this member\'s part of a storage pool failed'));
        return;
      }
      let reason: string | undefined;
      if (!driver) {
        reason = `storage driver "${pool.driver}" is not enabled in this build`;
      } else {
        try {
          await driver.mount(this.info(pool));
        } catch (err) {
          reason = (err as Error).message;
        }
      }
      if (reason === undefined) {
        this.availability.set(pool.name, { status: 'Created' });
        await this.ctx.warnings.resolve(UNAVAILABLE_WARNING, poolUrl(pool.name));
        return;
      }
      this.availability.set(pool.name, { status: 'Unavailable', reason });
      this.ctx.log.error({ pool: pool.name, reason }, 'storage pool unavailable');
      await this.ctx.warnings.raise({
        type: UNAVAILABLE_WARNING,
        message: `Storage pool "${pool.name}" is unavailable: ${reason}`,
        severity: 'high',
        entityUrl: poolUrl(pool.name),
      });
    }));
    this.ctx.refreshServerInfo();
    await this.parts.catchUp();
  }
}
