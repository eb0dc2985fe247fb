/**
 * Storage pools in a cluster, as the reference has them: each member holds its own part of a pool (its
 * directory or disk, from member-specific keys such as `source`); a pool is defined member by member
 * (`lxc storage create p dir --target m1`), then created cluster-wide, and each member makes its part
 * when it sees the record say so. The record in the shared store is the only channel between members:
 * no member calls another, so a member that was down makes its part when it comes back.
 */
import { badRequest, conflict, unavailable, type MemberConfigEntry, type PluginContext } from '../../sdk/index.js';
import type { DriverTable } from './drivers.js';
import { POOL_PROJECT, isMemberKey, poolInfo, splitForCluster, type MemberPart, type PoolRecord } from './pool.js';
import type { PoolManager } from './pools.js';

/** How long a cluster-wide create or delete waits for every member's part. */
const PARTS_BOUND_MS = 60_000;

export class MemberParts {
  /** Parts being made or removed here, by pool: the change feed may report the same record twice. */
  private readonly working = new Map<string, Promise<void>>();
  /** Waiters for a pool's record to change. */
  private readonly waiters = new Map<string, Set<() => void>>();

  constructor(private readonly ctx: PluginContext, private readonly pools: PoolManager, private readonly drivers: DriverTable) {
    ctx.store.onChange((change) => {
      if (change.collection !== 'pools' || change.project !== POOL_PROJECT) return;
      for (const wake of this.waiters.get(change.name) ?? []) wake();
      if (this.ctx.cluster.enabled && change.kind === 'put') void this.reconcile(change.name);
    });
  }

  private get self(): string {
    return this.ctx.cluster.serverName;
  }

  /** `lxc storage create p dir source=… --target m`: define this member's part (only member-specific keys). */
  async define(body: PoolRecord): Promise<void> {
    const member = this.self;
    for (const key of Object.keys(body.config)) {
      if (!isMemberKey(key)) throw badRequest(`Config key "${key}" may not be used as member-specific key`);
    }
    this.drivers.require(body.driver);
    const stored = await this.pools.records.get(POOL_PROJECT, body.name);
    if (!stored) {
      const record: PoolRecord = { name: body.name, driver: body.driver, description: body.description, config: {}, members: { [member]: { config: body.config, state: 'Pending' } }, created: false };
      await this.pools.records.put(POOL_PROJECT, body.name, record, 0);
      return;
    }
    const pool = stored.doc;
    if (pool.driver !== body.driver) throw badRequest(`Storage pool "${body.name}" is defined with driver "${pool.driver}", not "${body.driver}"`);
    if (pool.members?.[member]) throw conflict(`Storage pool "${body.name}" is already defined on member "${member}"`);
    const members = { ...pool.members, [member]: { config: body.config, state: 'Pending' as const } };
    await this.pools.records.put(POOL_PROJECT, body.name, { ...pool, members }, stored.rev);
  }

  /** The cluster-wide create: every member must have defined its part; each makes it, this waits for all. */
  async createEverywhere(body: PoolRecord): Promise<void> {
    for (const key of Object.keys(body.config)) {
      if (isMemberKey(key)) throw badRequest(`Config key "${key}" is member-specific: give it with --target for each member`);
    }
    this.drivers.validate(body.driver, body.config);
    const everyone = this.ctx.cluster.members().map((m) => m.name);
    let stored = await this.pools.records.get(POOL_PROJECT, body.name);
    if (!stored && everyone.length <= 1) {
      // A cluster of one needs no definition step, as in the reference.
      await this.define({ ...body, config: {} });
      stored = await this.pools.records.get(POOL_PROJECT, body.name);
    }
    if (!stored) throw badRequest(`Storage pool "${body.name}" is not defined on any member (define it with --target on each member first)`);
    const pool = stored.doc;
    if (pool.driver !== body.driver) throw badRequest(`Storage pool "${body.name}" is defined with driver "${pool.driver}", not "${body.driver}"`);
    const parts = pool.members ?? {};
    if (pool.created && !Object.values(parts).some((p) => p.state === 'Errored')) throw conflict(`Storage pool "${body.name}" already exists`);
    const missing = everyone.filter((name) => !parts[name]);
    if (missing.length) throw badRequest(`Storage pool "${body.name}" is not defined on member${missing.length > 1 ? 's' : ''} ${missing.join(', ')}`);
    for (const name of everyone) {
      if (this.ctx.cluster.members().find((m) => m.name === name)?.online === false) throw unavailable(`Cluster member "${name}" is offline: the pool cannot be created there`);
    }
    const retried: Record<string, MemberPart> = {};
    for (const [name, part] of Object.entries(parts)) retried[name] = part.state === 'Created' ? part : { config: part.config, state: 'Pending' };
    await this.pools.records.put(POOL_PROJECT, body.name, {
      ...pool, description: body.description || pool.description, config: body.config, members: retried, created: true,
    }, stored.rev);
    const final = await this.waitFor(body.name, (p) => !p || Object.values(p.members ?? {}).every((part) => part.state !== 'Pending'));
    const failed = Object.entries(final?.members ?? {}).filter(([, part]) => part.state === 'Errored');
    if (failed.length) {
      throw badRequest(`Storage pool "${body.name}" could not be created on ${failed.map(([name, part]) => `member "${name}": ${part.error ?? 'unknown error'}`).join('; ')}`);
    }
  }

  /** The cluster-wide delete: every member removes its part; the record goes once none is left. */
  async deleteEverywhere(name: string): Promise<void> {
    const stored = await this.pools.records.get(POOL_PROJECT, name);
    if (!stored) return;
    for (const member of Object.keys(stored.doc.members ?? {})) {
      if (this.ctx.cluster.members().find((m) => m.name === member)?.online === false) throw unavailable(`Cluster member "${member}" is offline: the pool cannot be deleted there`);
    }
    await this.pools.records.put(POOL_PROJECT, name, { ...stored.doc, deleting: true }, stored.rev);
    try {
      await this.waitFor(name, (p) => !p || Object.keys(p.members ?? {}).length === 0);
    } catch (err) {
      // Members that did not answer keep their part: the pool stays, and a second delete finishes it.
      const now = await this.pools.records.get(POOL_PROJECT, name);
      if (now) await this.pools.records.put(POOL_PROJECT, name, { ...now.doc, deleting: false }, now.rev).catch(() => undefined);
      throw err;
    }
    const emptied = await this.pools.records.get(POOL_PROJECT, name);
    if (emptied) await this.pools.records.delete(POOL_PROJECT, name, emptied.rev);
  }

  /** Make or remove this member's part when the record asks for it (from the change feed and at boot). */
  reconcile(name: string): Promise<void> {
    const running = this.working.get(name);
    if (running) return running.then(() => this.reconcile(name));
    const work = this.reconcileOnce(name).finally(() => this.working.delete(name));
    this.working.set(name, work);
    return work;
  }

  private async reconcileOnce(name: string): Promise<void> {
    const stored = await this.pools.records.get(POOL_PROJECT, name);
    const part = stored?.doc.members?.[this.self];
    if (!stored || !part) return;
    if (stored.doc.deleting) {
      if (part.state === 'Created') await this.removePart(stored.doc);
      await this.writePart(name, undefined);
      this.pools.forget(name);
      return;
    }
    if (!stored.doc.created || part.state !== 'Pending') return;
    const update = await this.makePart(stored.doc, part);
    await this.writePart(name, update);
  }

  /** Create this member's part on its disk; answers the part as it should be recorded. */
  private async makePart(pool: PoolRecord, part: MemberPart): Promise<MemberPart> {
    const driver = this.drivers.get(pool.driver);
    if (!driver) return { ...part, state: 'Errored', error: `storage driver "${pool.driver}" is not enabled in this build` };
    const info = poolInfo({ ...pool, members: { [this.self]: part } }, this.self);
    try {
      driver.fillDefaults?.(info, this.ctx.dataDir);
      await driver.create(info);
    } catch (err) {
      this.ctx.log.error({ err, pool: pool.name }, 'making this member\'s part of a storage pool failed');
      return { ...part, state: 'Errored', error: (err as Error).message };
    }
    const own: Record<string, string> = {};
    for (const [key, value] of Object.entries(info.config)) if (isMemberKey(key)) own[key] = value;
    this.pools.markCreated(pool.name);
    return { config: own, state: 'Created' };
  }

  /** Record this member's part (or its removal, `undefined`), retrying when another member wrote in between. */
  private async writePart(name: string, part: MemberPart | undefined): Promise<void> {
    for (let attempt = 0; attempt < 20; attempt++) {
      const stored = await this.pools.records.get(POOL_PROJECT, name);
      if (!stored) return;
      const members = { ...stored.doc.members };
      if (part) members[this.self] = part;
      else delete members[this.self];
      try {
        await this.pools.records.put(POOL_PROJECT, name, { ...stored.doc, members }, stored.rev);
        return;
      } catch (err) {
        if ((err as { status?: number }).status !== 412) throw err;
      }
    }
    throw unavailable(`Storage pool "${name}" changed too often to record this member's part`);
  }

  /** Bootstrap: this server's pools become the cluster's, their member keys this member's part. */
  async split(): Promise<void> {
    for (const stored of await this.pools.records.list(POOL_PROJECT)) {
      if (stored.doc.members) continue;
      await this.pools.records.put(POOL_PROJECT, stored.name, splitForCluster(stored.doc, this.self), stored.rev);
    }
  }

  /** Join: make this member's part of every pool the cluster has, from the joiner's `member_config`. */
  async join(memberConfig: MemberConfigEntry[]): Promise<void> {
    const made: PoolRecord[] = [];
    try {
      for (const stored of await this.pools.records.list(POOL_PROJECT)) {
        const own: Record<string, string> = {};
        for (const entry of memberConfig) {
          if (entry.entity === 'storage-pool' && entry.name === stored.name && entry.value !== '') own[entry.key] = entry.value;
        }
        const part = await this.makePart(stored.doc, { config: own, state: 'Pending' });
        if (part.state === 'Errored') throw badRequest(`Storage pool "${stored.name}" could not be created on this member: ${part.error}`);
        made.push(poolInfoRecord(stored.doc, this.self, part));
        await this.writePart(stored.name, part);
      }
    } catch (err) {
      for (const pool of made) await this.removePart(pool).catch(() => undefined);
      throw err;
    }
  }

  /** What a joiner must give for each pool (GET /1.0/cluster `member_config`). */
  async keysForJoiners(): Promise<MemberConfigEntry[]> {
    const pools = await this.pools.records.list(POOL_PROJECT);
    return pools.map(({ doc }) => ({
      entity: 'storage-pool', name: doc.name, key: 'source', value: '',
      description: `"source" property for storage pool "${doc.name}"`,
    }));
  }

  private async removePart(pool: PoolRecord): Promise<void> {
    const driver = this.drivers.get(pool.driver);
    await driver?.delete(poolInfo(pool, this.self));
  }

  /** Wait (bounded) until `done` holds for the pool's record (undefined once deleted). */
  private async waitFor(name: string, done: (pool: PoolRecord | undefined) => boolean): Promise<PoolRecord | undefined> {
    const deadline = Date.now() + PARTS_BOUND_MS;
    for (;;) {
      const current = (await this.pools.records.get(POOL_PROJECT, name))?.doc;
      if (done(current)) return current;
      const left = deadline - Date.now();
      if (left <= 0) throw unavailable(`Storage pool "${name}": not every cluster member answered within ${PARTS_BOUND_MS / 1000} s`);
      await new Promise<void>((resolve) => {
        const set = this.waiters.get(name) ?? new Set();
        this.waiters.set(name, set);
        const wake = () => {
          set.delete(wake);
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(wake, Math.min(left, 1000));
        set.add(wake);
      });
    }
  }
}

const poolInfoRecord = (pool: PoolRecord, member: string, part: MemberPart): PoolRecord => ({ ...pool, members: { [member]: part } });
