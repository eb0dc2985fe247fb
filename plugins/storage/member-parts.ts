/**
 * Storage pools in a cluster: each member holds its own part of a pool (its directory or disk, from the
 * member-specific keys such as `source`), defined with `--target` and made when the pool is created
 * cluster-wide (sdk/lib/cluster). This file says what making and removing a pool's part means here.
 */
import { badRequest, type Collection, type PluginContext } from '../../sdk/index.js';
import { MemberParts } from '../../sdk/lib/cluster/index.js';
import type { DriverTable } from './drivers.js';
import { changedKeys, isMemberKey, poolInfo, type PoolRecord } from './pool.js';

/** What the member parts need of the pool manager (an interface, not the class: pools.ts imports this file). */
export interface PoolPartsHost {
  readonly records: Collection<PoolRecord>;
  markCreated(name: string): void;
  forget(name: string): void;
}

export function poolParts(ctx: PluginContext, pools: PoolPartsHost, drivers: DriverTable): MemberParts<PoolRecord> {
  const driverFor = (pool: PoolRecord) => {
    const driver = drivers.get(pool.driver);
    if (!driver) throw badRequest(`storage driver "${pool.driver}" is not enabled in this build`);
    return driver;
  };
  return new MemberParts<PoolRecord>({
    cluster: ctx.cluster,
    records: pools.records,
    collection: 'pools',
    onChange: (listener) => ctx.store.onChange(listener),
    what: 'Storage pool',
    entity: 'storage-pool',
    isMemberKey,
    joinKeys: () => ['source'],
    log: ctx.log,
    async make(_project, pool, part) {
      const info = poolInfo({ ...pool, members: { [ctx.cluster.serverName]: part } }, ctx.cluster.serverName);
      const driver = driverFor(pool);
      driver.fillDefaults?.(info, ctx.dataDir);
      await driver.create(info);
      const own: Record<string, string> = {};
      for (const [key, value] of Object.entries(info.config)) if (isMemberKey(key)) own[key] = value;
      return own;
    },
    // A cluster-wide edit of the shared keys: this member's driver takes what changed (a remount...).
    async apply(_project, pool) {
      const driver = driverFor(pool);
      const changed = changedKeys(pool.before?.config ?? pool.config, pool.config);
      if (driver.update && Object.keys(changed).length) await driver.update(poolInfo(pool, ctx.cluster.serverName), changed);
    },
    async remove(_project, pool) {
      await driverFor(pool).delete(poolInfo(pool, ctx.cluster.serverName));
    },
    changed(_project, name, part) {
      if (part?.state === 'Created') pools.markCreated(name);
      else if (!part) pools.forget(name);
    },
  });
}

