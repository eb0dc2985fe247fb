/**
 * The instances family host: instance records and routes; the extension point for instance
 * drivers and device types (InstancesExtensionPointRef), the run-time service (InstancesServiceRef)
 * and the hook set its neighbours follow (InstanceHooksRef).
 */
import {
  CustomVolumesServiceRef, definePlugin, featureProjectOf, ImagesServiceRef, InstanceHooksRef, InstancesExtensionPointRef, InstancesServiceRef,
  ProfilesServiceRef, StorageServiceRef, instanceUrl, resourceUrl,
  type InstanceDriver, type InstancesExtensionPoint, type InstanceSummary, type InstanceType, type InstancesService, type PluginContext,
  type StoredDoc,
} from '../../sdk/index.js';
import type { InstanceRecord } from './record.js';
import { INSTANCE_KEYS } from './keys.js';
import { DeviceTypes } from './devices/device-types.js';
import { diskDevice, isRootDisk } from './devices/disk.js';
import { noneDevice } from './devices/none.js';
import { InstanceManager } from './manager.js';
import { expandConfig, expandDevices } from './expand.js';
import { PowerControl } from './power.js';
import { collectionRoutes } from './routes/collection.js';
import { instanceRoutes } from './routes/instance.js';
import { stateRoutes } from './routes/state.js';
import { execRoutes } from './routes/exec.js';
import { consoleRoutes } from './routes/console.js';
import { metadataRoutes } from './routes/metadata.js';
import { metadataTemplateRoutes } from './routes/metadata-templates.js';
import { applyTemplates } from './templates/apply.js';
import { deferTemplatesOnChanges } from './templates/deferred.js';
import { createInstanceHooks } from './hooks.js';
import { filesRoutes } from './routes/files.js';
import { logsRoutes } from './routes/logs.js';
import { snapshotRoutes } from './routes/snapshots.js';
import { guardRouteType } from './routes/type-guard.js';
import { setupBackups } from './backups/setup.js';
import { SnapshotManager } from './snapshots/manager.js';
import { SNAPSHOT_KEYS } from './snapshots/keys.js';
import { SnapshotScheduler } from './snapshots/scheduler.js';
import { scheduleLogExpiry } from './log-expiry.js';
import { cleanupLeftovers } from './leftovers.js';
import { checkProfileDependants } from './profile-dependants.js';
import { applyProfileToRunning } from './profile-updates.js';
import { applyProfileRootQuotas, quotaOnDeviceChanges } from './root-quota.js';
import { registerImageSources } from './publish.js';
import { collectMetrics } from './metrics.js';
import { locateInstanceRoute } from './routes/locate.js';
import { runtimeRoute } from './cluster-runtime.js';
import { bulkStateRoute } from './cluster-bulk-state.js';
import { provideEvacuation } from './evacuation.js';
import { locationOf } from './location.js';
import { claimUnplaced, followClusterIdentity } from './location-claim.js';


function need<T>(ctx: PluginContext, ref: { id: string }, value: T | undefined): T {
  if (!value) throw new Error(`the instances plugin needs the "${ref.id}" service`);
  return value;
}

export default definePlugin({
  register(ctx) {
    const drivers = new Map<InstanceType, InstanceDriver>();
    const devices = new DeviceTypes(ctx.catalog);
    const storage = need(ctx, StorageServiceRef, ctx.services.get(StorageServiceRef));
    const images = need(ctx, ImagesServiceRef, ctx.services.get(ImagesServiceRef));
    const profiles = need(ctx, ProfilesServiceRef, ctx.services.get(ProfilesServiceRef));
    for (const key of [...INSTANCE_KEYS, ...SNAPSHOT_KEYS]) ctx.keys.register(key);
    devices.register(diskDevice(() => storage, () => ctx.services.get(CustomVolumesServiceRef)));
    devices.register(noneDevice);

    // Per daemon, never module-wide: a test process may run several kernels.
    const hooks = createInstanceHooks();
    ctx.services.provide(InstanceHooksRef, hooks);
    const manager = new InstanceManager(ctx, { storage, images, profiles, devices, drivers }, hooks);
    const power = new PowerControl(ctx, manager);
    const snapshots = new SnapshotManager(ctx, manager);
    manager.children.snapshots = snapshots.lister();
    // The neighbours follow instance changes through the hook set.
    deferTemplatesOnChanges(hooks, { applyTemplates, touch: (project, name, change) => manager.touch(project, name, change) });
    manager.deviceRuntime.followInstances(hooks);
    quotaOnDeviceChanges(hooks, storage);
    const scheduler = new SnapshotScheduler(ctx, manager, snapshots, hooks);
    let logExpiry: { stop(): void } | undefined;

    const registration: InstancesExtensionPoint = {
      registerDriver(driver) {
        if (drivers.has(driver.type)) throw new Error(`a driver for ${driver.type} instances is registered twice`);
        drivers.set(driver.type, driver);
        // Keys both kinds of instance use (limits.cpu...) are registered by the first driver that brings them.
        for (const key of driver.configKeys ?? []) {
          if (key.key !== undefined && ctx.keys.lookup('instance', key.key)?.key === key.key) continue;
          ctx.keys.register(key);
        }
      },
      registerDeviceType: (type) => devices.register(type),
    };
    ctx.extensionPoints.provide(InstancesExtensionPointRef, registration);
    const summaryOf = async (s: StoredDoc<InstanceRecord>): Promise<InstanceSummary> => {
      const profiles = await manager.loadProfiles(s.project, s.doc.profiles).catch(() => []);
      return {
        project: s.project, name: s.name, type: s.doc.type, location: locationOf(ctx.cluster, s.doc), profiles: s.doc.profiles, config: s.doc.config, devices: s.doc.devices,
        expandedConfig: expandConfig(profiles, s.doc.config), expandedDevices: expandDevices(profiles, s.doc.devices),
      };
    };
    const service: InstancesService = {
      metrics: (project) => collectMetrics(manager, project),
      list: async (project) => {
        // Kept summaries are taken as they are: a promise per instance was most of what a 10,000-instance walk allocated.
        const records = await manager.index.list(project);
        const out: Readonly<InstanceSummary>[] = new Array(records.length);
        const missing: Promise<void>[] = [];
        records.forEach((s, i) => {
          const kept = manager.views.summaryNow(s);
          if (kept) out[i] = kept;
          else missing.push(manager.views.summary(s, () => summaryOf(s)).then((summary) => void (out[i] = summary)));
        });
        await Promise.all(missing);
        return out;
      },
      async get(project, name) {
        const stored = await manager.records.get(project, name);
        return stored && summaryOf(stored);
      },
    };
    ctx.services.provide(InstancesServiceRef, service);

    /**
     * Instance records whose profiles (images) live in `project`: its own, and for `default` also
     * those of projects without `features.profiles` (`features.images`).
     */
    const recordsUsing = async (feature: 'profiles' | 'images', project: string) => {
      if (project !== 'default') return manager.index.list(project);
      const all = await manager.index.list();
      // Asked once per project, not once per instance (a promise each was ~4 MB at 10,000 instances).
      const projects = new Set<string>();
      for (const s of all) projects.add(s.project);
      const homes = new Map(await Promise.all([...projects].map(async (p) => [p, await featureProjectOf(ctx.services, p, feature)] as const)));
      return all.filter((s) => homes.get(s.project) === 'default');
    };

    // What uses profiles, pools and images.
    profiles.usedBy.add(async (project, name, memo) => (await memo.get(`records:profiles:${project}`, () => recordsUsing('profiles', project)))
      .filter((s) => s.doc.profiles.includes(name)).map((s) => instanceUrl(s.project, s.name)));
    storage.poolUsedBy.add(async (_project, pool, memo) => (await memo.get('records', () => manager.index.list()))
      .filter((s) => s.doc.pool === pool).map((s) => instanceUrl(s.project, s.name)));
    images.usedBy.add(async (project, fingerprint, memo) => (await memo.get(`records:images:${project}`, () => recordsUsing('images', project)))
      .filter((s) => s.doc.config['volatile.base_image'] === fingerprint).map((s) => resourceUrl(`/1.0/instances/${s.name}`, s.project)));
    registerImageSources(ctx, manager, images);

    // Profile edits: validate against device types and the drivers of the instances using them, and re-apply live keys to running instances.
    profiles.onChange(async (change) => {
      if (!change.profile) return;
      devices.validate(change.profile.devices, { instanceType: 'any', profile: true, project: change.project });
      for (const dev of Object.values(change.profile.devices)) {
        if (isRootDisk(dev)) await storage.pool(dev.pool);
      }
      await checkProfileDependants(manager, change, () => recordsUsing('profiles', change.project));
      const quotasBack = await applyProfileRootQuotas(manager, storage, change);
      await applyProfileToRunning(manager, change).catch(async (err) => {
        await quotasBack();
        throw err;
      });
    });

    for (const route of [
      collectionRoutes(ctx, manager, power, snapshots),
      instanceRoutes(ctx, manager, power, snapshots),
      stateRoutes(ctx, manager, power),
      execRoutes(ctx, manager, power),
      consoleRoutes(ctx, manager, power),
      metadataRoutes(ctx, manager),
      metadataTemplateRoutes(ctx, manager),
      filesRoutes(ctx, manager),
      ...logsRoutes(ctx, manager),
      ...snapshotRoutes(ctx, manager, power, snapshots),
      ...setupBackups(ctx, manager),
    ]) ctx.routes.add(guardRouteType(locateInstanceRoute(ctx, manager, route), async (project, name) => (await manager.records.get(project, name))?.doc.type));
    ctx.routes.add(runtimeRoute(manager, power, ctx));
    ctx.routes.add(bulkStateRoute(ctx, manager, power));
    provideEvacuation(ctx, manager, power, snapshots);
    const unfollow = followClusterIdentity(ctx, manager);

    ctx.hooks.ready.tap(async () => {
      // Device plugins registered in their register phase; the daemon serves with a fixed set.
      devices.seal();
      // A member boots with its records placed before it adopts, starts or cleans anything.
      await claimUnplaced(ctx, manager);
      await cleanupLeftovers(ctx, manager);
      logExpiry = scheduleLogExpiry(ctx, manager.logsRoot);
      scheduler.start();
    });
    // Adoption and autostart in the background, once the API is open (as the reference's): with
    // thousands of instances the walk would otherwise share the opening's turns of the loop.
    ctx.hooks.serving.tap(() => void power.boot().catch((err) => ctx.log.error({ err }, 'instance autostart failed')));
    ctx.hooks.shutdown.tap(async (info) => {
      unfollow();
      power.stopWatching();
      manager.deviceRuntime.followers.clear();
      logExpiry?.stop();
      scheduler.stop();
      if (info.hostShutdown) await power.shutdownAll();
    });
  },
});
