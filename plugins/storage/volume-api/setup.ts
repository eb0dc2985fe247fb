/** Wires the volume API into the storage family host: keys, routes, services and boot recovery. */
import path from 'node:path';
import {
  BLOCK_IMAGE, CustomVolumesServiceRef, daemonStorageAvailable, DaemonStorageServiceRef, featureProjectOf,
  ProjectsServiceRef, resourceUrl, type CustomVolumeInfo, type CustomVolumesService, type PluginContext,
} from '../../../sdk/index.js';
import { BACKUP_COMPRESSION_KEY } from '../../../sdk/lib/backup/index.js';
import type { PoolManager } from '../pools.js';
import type { SharedLock } from '../shared-lock.js';
import type { VolumeManager } from '../volumes.js';
import { volumeBackupRoutes, VolumeBackupImporter } from './backup-routes.js';
import { VolumeBackups } from './backups.js';
import { VolumeCatalog } from './catalog.js';
import { DaemonStorage } from './daemon-storage.js';
import { CustomVolumes } from './custom-volumes.js';
import { VOLUME_KEYS } from './keys.js';
import type { CustomVolumeRecord } from './record.js';
import { volumeRoutes } from './routes.js';
import { snapshotRoutes, VolumeSnapshots } from './snapshots.js';
import { InstanceVolumeSnapshots } from './instance-volume-snapshots.js';
import { VolumeUsers } from './users.js';

export interface VolumeApi {
  boot(): Promise<void>;
}

export function registerVolumeApi(ctx: PluginContext, pools: PoolManager, volumes: VolumeManager, locks: SharedLock): VolumeApi {
  for (const key of VOLUME_KEYS) ctx.keys.register(key);
  const catalog = new VolumeCatalog(ctx);
  const users = new VolumeUsers(ctx);
  const custom = new CustomVolumes(ctx, pools, volumes, locks, catalog, users);

  const info = (project: string, doc: CustomVolumeRecord): CustomVolumeInfo =>
    ({ pool: doc.pool, project, name: doc.name, contentType: doc.contentType, config: doc.config });
  const service: CustomVolumesService = {
    find(pool, project, name) {
      const entry = catalog.find(project, pool, name) ?? (project === 'default' ? undefined : catalog.find('default', pool, name));
      return entry && info(entry.project, entry.doc);
    },
    list: (project) => catalog.list(undefined, project).map((e) => info(e.project, e.doc)),
    async lookup(pool, project, name) {
      const home = await featureProjectOf(ctx.services, project, 'storage.volumes');
      const entry = catalog.find(home, pool, name);
      return entry && info(home, entry.doc);
    },
    path: (vol) => custom.path(vol.pool, vol.project, vol.name),
    blockFile: async (vol) => path.join(await custom.path(vol.pool, vol.project, vol.name), BLOCK_IMAGE),
  };
  ctx.services.provide(CustomVolumesServiceRef, service);

  const daemonStorage = new DaemonStorage(ctx, pools, catalog, custom, users);
  for (const key of daemonStorage.keys()) ctx.keys.register(key);
  users.daemonHolds = (project, pool, name) => daemonStorage.holds(project, pool, name);
  ctx.services.provide(DaemonStorageServiceRef, daemonStorage);

  const snapshots = new VolumeSnapshots(
    ctx, volumes, catalog, (project, pool, name) => daemonStorage.holds(project, pool, name),
    (project, pool, name, doing) => custom.awaitMigration(project, pool, name, doing),
  );
  // Shared with instance backups: whichever family loads first registers it.
  if (!ctx.keys.lookup('server', BACKUP_COMPRESSION_KEY.key!)) ctx.keys.register(BACKUP_COMPRESSION_KEY);
  const backups = new VolumeBackups(ctx, pools, volumes, catalog);
  custom.followers.push((from, to) => backups.follow(from, to));
  const importer = new VolumeBackupImporter(ctx, backups, custom);
  const routes = volumeRoutes({
    ctx, pools, volumes, custom, users,
    more: [...snapshotRoutes(ctx, snapshots, catalog, new InstanceVolumeSnapshots(volumes, users)), ...volumeBackupRoutes(ctx, backups)],
    importBackup: (req, pool, project) => importer.post(req, pool, project),
    restore: (pool, project, volume, snapshot, req) => snapshots.restore(project, pool, volume, snapshot, req.requestor),
  });
  for (const route of routes) ctx.routes.add(route);

  // Pools that hold custom volumes are in use by them.
  pools.usedBy.add((_project, pool) => catalog.list(pool).map((e) => resourceUrl(`/1.0/storage-pools/${encodeURIComponent(pool)}/volumes/custom/${encodeURIComponent(e.doc.name)}`, e.project)));

  let expiryTimer: NodeJS.Timeout | undefined;
  const scheduleExpiry = () => {
    const run = () => ctx.operations.create({
      class: 'task',
      description: 'Cleaning up expired volume backups',
      run: async () => {
        const removed = await backups.expire();
        if (removed) ctx.log.info({ removed }, 'removed expired volume backups');
      },
    });
    run();
    expiryTimer = setInterval(run, 3600_000);
    expiryTimer.unref();
  };
  ctx.hooks.shutdown.tap(async () => {
    if (expiryTimer) clearInterval(expiryTimer);
  });

  return {
    async boot() {
      // Projects see their custom volumes (used_by, no rename or delete while they hold some).
      ctx.services.get(ProjectsServiceRef)?.contents.add((project) => catalog.list(undefined, project)
        .map((e) => resourceUrl(`/1.0/storage-pools/${encodeURIComponent(e.doc.pool)}/volumes/custom/${encodeURIComponent(e.doc.name)}`, e.project)));
      await custom.recover();
      // Before images and backups boot: they ask it for their directories.
      await daemonStorage.boot();
      if (daemonStorageAvailable(ctx, 'backups')) await backups.cleanup();
      snapshots.start();
      scheduleExpiry();
    },
  };
}
