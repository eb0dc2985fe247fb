/**
 * The storage family host: pool records and routes, the volume helpers other families use, and
 * the extension point for storage drivers (StorageExtensionPointRef).
 */
import {
  createUsedByRegistry, definePlugin, Stage, StorageExtensionPointRef, StorageServiceRef, type PluginContext, type StorageService,
} from '../../sdk/index.js';
import { DriverTable } from './drivers.js';
import { storageEnvironment } from './environment.js';
import { POOL_KEYS } from './keys.js';
import { POOL_DEFAULT_KEYS } from './volume-defaults.js';
import { PoolManager } from './pools.js';
import { poolRoutes } from './routes.js';
import { SharedLock } from './shared-lock.js';
import { VolumeManager } from './volumes.js';
import { InstanceVolumeRecords } from './instance-volumes.js';
import { registerVolumeApi, type VolumeApi } from './volume-api/setup.js';

/** Per kernel: several test kernels may load this module in one process. */
const poolManagers = new WeakMap<PluginContext, PoolManager>();
const volumeApis = new WeakMap<PluginContext, VolumeApi>();
const driverTables = new WeakMap<PluginContext, DriverTable>();

export default definePlugin({
  register(ctx) {
    for (const key of [...POOL_KEYS, ...POOL_DEFAULT_KEYS]) ctx.keys.register(key);
    const drivers = new DriverTable(ctx.keys, ctx.catalog);
    driverTables.set(ctx, drivers);
    const locks = new SharedLock();
    const poolUsedBy = createUsedByRegistry();
    const pools = new PoolManager(ctx, drivers, locks, poolUsedBy);
    poolManagers.set(ctx, pools);
    const volumes = new VolumeManager(ctx, pools, locks, new InstanceVolumeRecords(ctx));

    ctx.extensionPoints.provide(StorageExtensionPointRef, { registerDriver: (driver) => drivers.register(driver) });
    const service: StorageService = {
      pool: async (name) => (await pools.usable(name)).info,
      poolNames: async () => (await pools.list()).map((p) => p.name),
      createInstanceVolume: (pool, vol, source, state) => volumes.createInstanceVolume(pool, vol, source, state),
      volumeState: (pool, vol) => volumes.volumeState(pool, vol),
      deleteVolume: (pool, vol) => volumes.deleteVolume(pool, vol),
      flattenVolume: (pool, vol) => volumes.flattenVolume(pool, vol),
      renameVolume: (pool, vol, newName, newProject) => volumes.renameVolume(pool, vol, newName, newProject),
      volumePath: (pool, vol) => volumes.volumePath(pool, vol),
      volumeUsage: (pool, vol) => volumes.volumeUsage(pool, vol),
      listVolumes: (pool, type) => volumes.listVolumes(pool, type),
      deleteImageVolumes: (fingerprint) => volumes.deleteImageVolumes(fingerprint),
      createSnapshot: (pool, vol, snapshot) => volumes.createSnapshot(pool, vol, snapshot),
      deleteSnapshot: (pool, vol, snapshot) => volumes.deleteSnapshot(pool, vol, snapshot),
      renameSnapshot: (pool, vol, snapshot, newName) => volumes.renameSnapshot(pool, vol, snapshot, newName),
      restoreSnapshot: (pool, vol, snapshot) => volumes.restoreSnapshot(pool, vol, snapshot),
      snapshotPath: (pool, vol, snapshot) => volumes.snapshotPath(pool, vol, snapshot),
      snapshotUsage: (pool, vol, snapshot) => volumes.snapshotUsage(pool, vol, snapshot),
      listSnapshots: (pool, vol) => volumes.listSnapshots(pool, vol),
      listSnapshotsOfMany: (pool, type, vols) => volumes.listSnapshotsOfMany(pool, type, vols),
      refreshVolume: (pool, vol, source) => volumes.refreshVolume(pool, vol, source),
      poolUsedBy,
      setVolumeQuota: (pool, vol, bytes) => volumes.setVolumeQuota(pool, vol, bytes),
      optimizedFormat: (pool) => volumes.optimizedFormat(pool),
      sendVolume: (pool, vol, snapshots, write, amend) => volumes.sendVolume(pool, vol, snapshots, write, amend),
      driver: (name) => drivers.get(name),
    };
    ctx.services.provide(StorageServiceRef, service);
    for (const route of poolRoutes(pools)) ctx.routes.add(route);
    ctx.hooks.environment.tap(storageEnvironment(drivers, pools));
    // Late: instances stop first on a host shutdown. Loop-backed pools give their loop device back.
    ctx.hooks.shutdown.tap(() => pools.unmountAll(), { stage: Stage.LATE });
    // Becoming a cluster member: the first member's pools become the cluster's; a joiner makes its part of each.
    ctx.hooks.clusterJoined.tap((info) => (info.bootstrap ? pools.parts.split() : pools.parts.join(info.memberConfig)));
    ctx.hooks.memberConfigKeys.tap(async (entries) => [...entries, ...(await pools.parts.keysForJoiners())]);
    volumeApis.set(ctx, registerVolumeApi(ctx, pools, volumes, locks));
  },

  async boot(ctx) {
    driverTables.get(ctx)!.seal();
    await poolManagers.get(ctx)!.mountAll();
    await volumeApis.get(ctx)!.boot();
  },
});
