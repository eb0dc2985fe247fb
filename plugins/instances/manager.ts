/**
 * Instance records and what changes them: create, edit, rename, delete. Power changes live in
 * power.ts. Every multi-step change undoes its earlier steps when a later one fails, and the
 * order of steps is chosen so that a crash leaves nothing the boot-time cleanup cannot remove.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, rename as renameFile, rm } from 'node:fs/promises';
import path from 'node:path';
import {
  badRequest, conflict, KeyedLock, notFound, truthy, instanceUrl, ProjectsServiceRef,
  type ApiRequest, type InstanceProposal, type Collection, type DeviceConfig, type DriverInstance, type ImagesService, type InstanceDriver,
  type InstanceMoveCause, type InstanceOrigin, type InstanceType, type PluginContext, type Profile, type ProfilesService,
  type StorageService, type StoredDoc, type VolumeSource, type VolumeState,
} from '../../sdk/index.js';
import type { InstanceAccess, InstanceHandle } from './access.js';
import { expandConfig, expandDevices } from './expand.js';
import { mayShareImage } from './shared-rootfs.js';
import { isRootDisk } from './devices/disk.js';
import { checkDevices, type DeviceTypes } from './devices/device-types.js';
import { liveChanges } from './live-keys.js';
import { applyVolatile, DeviceRuntime } from './device-runtime.js';
import { refOf, Undo, type FamilyHooks } from './hooks.js';
import { NEVER, type InstanceRecord } from './record.js';
import { snapshotKey, type SnapshotRecord } from './snapshots/record.js';
import type { ChildKinds } from './children.js';
import { isHere, locationOf } from './location.js';
import { RecordIndex } from './record-index.js';
import { ListingViews } from './listing-views.js';

export interface InstanceDeps {
  storage: StorageService;
  images: ImagesService;
  profiles: ProfilesService;
  devices: DeviceTypes;
  drivers: Map<InstanceType, InstanceDriver>;
}

/** The user-modifiable part of an instance (PUT body, ETag source). */
export interface InstanceEdit {
  architecture: string;
  config: Record<string, string>;
  devices: Record<string, DeviceConfig>;
  ephemeral: boolean;
  profiles: string[];
  description: string;
}

export interface CreateSpec extends InstanceEdit {
  project: string;
  name: string;
  type: InstanceType;
  source: VolumeSource;
  /** Volatile keys carried from a copy source or an image. */
  extraConfig: Record<string, string>;
  /** Told to the `creating` taps (templates owed at the first start, for one). */
  origin: InstanceOrigin;
  /** Snapshot records written with the instance record (copies and backup imports); the volume source makes their storage. */
  snapshots?: SnapshotRecord[];
  /** What the new volume carries (a backup import); the storage family's defaults otherwise. */
  volumeState?: VolumeState;
}

/** What the project policy gate is told besides the expanded instance (see InstanceProposal). */
export type InstanceVet = Pick<InstanceProposal, 'action' | 'name' | 'replaces' | 'target'>;

/** The logs root is root's alone, as the reference's log directory is: logs may tell what runs inside. */
export const LOGS_MODE = 0o700;

/** Volume paths kept (see volumePathOf); past this the map starts again. */
const VOLUME_PATHS_MAX = 50_000;

export const volumeName = (project: string, name: string) => (project === 'default' ? name : `${project}_${name}`);

export class InstanceManager implements InstanceAccess {
  readonly records: Collection<InstanceRecord>;
  /** Every record, parsed once, for the read-only paths that walk them all (shared documents: never edit them). */
  readonly index: RecordIndex;
  /** Handles and recursion=1 views of listed instances, kept while they stay true. */
  readonly views = new ListingViews();
  readonly lock = new KeyedLock();
  private readonly reserved = new Set<string>();
  private readonly profileCache = new Map<string, Profile>();
  private readonly profileLoads = new Map<string, Promise<Profile>>();
  private profileGeneration = 0;
  private readonly volumePaths = new Map<string, string>();
  /** recursion=2 lists of what an instance owns, wired by the snapshot and backup modules. */
  readonly children: ChildKinds = {};
  /** Devices of running instances: start and stop hooks, hot-plug. */
  readonly deviceRuntime: DeviceRuntime;

  /** Neighbours (backups, snapshots, templates, quotas, devices) follow the changes made here through these. */
  constructor(private readonly ctx: PluginContext, readonly deps: InstanceDeps, readonly hooks: FamilyHooks) {
    this.records = ctx.store.collection<InstanceRecord>('instances');
    this.index = new RecordIndex(ctx, this.records);
    this.deviceRuntime = new DeviceRuntime(ctx, deps.devices);
    // A device that follows the host is plugged again under the instance's lock, never beside an edit of it.
    this.deviceRuntime.onHostChange = (project, name, device) => this.lock.run(`${project}/${name}`, async () => {
      const handle = await this.load(project, name).catch(() => undefined);
      if (handle) await this.deviceRuntime.replug(handle, device);
    }).catch((err) => ctx.log.warn({ err, instance: name, device }, 'following a host device failed'));
    // Profiles are read for every listed instance: cache them, drop the cache on any profile change,
    // and on any project change (features.profiles, a project's own profiles created or dropped).
    ctx.events.subscribe((event) => {
      const action = (event.metadata as { action?: string }).action ?? '';
      // Volume paths (and the kept handles holding them) follow the pools; a member joining a cluster takes the cluster's (below).
      if (action.startsWith('storage-pool-')) {
        this.volumePaths.clear();
        this.views.invalidate();
      }
      if (action.startsWith('profile-') || action.startsWith('project-')) {
        this.profileCache.clear();
        this.profileLoads.clear();
        this.profileGeneration++;
        this.views.invalidate();
      }
    }, ['lifecycle']);
    ctx.cluster.onChange(() => this.volumePaths.clear());
  }

  get log(): PluginContext['log'] {
    return this.ctx.log;
  }

  get logsRoot(): string {
    return path.join(this.ctx.dataDir, 'logs');
  }

  logDir(project: string, name: string): string {
    return path.join(this.logsRoot, volumeName(project, name));
  }

  /**
   * The drivers' status revisions together (InstanceDriver.statusRevision): equal while no instance's
   * status changed; undefined when a driver cannot tell.
   */
  statusRevision(): string | undefined {
    let token = '';
    for (const driver of this.deps.drivers.values()) {
      const revision = driver.statusRevision?.();
      if (revision === undefined) return undefined;
      token += `${revision}.`;
    }
    return token;
  }

  driverFor(type: InstanceType): InstanceDriver {
    const driver = this.deps.drivers.get(type);
    if (!driver) throw badRequest(`Instance type "${type}" is not enabled in this build`);
    return driver;
  }

  async loadProfiles(project: string, names: string[]): Promise<Profile[]> {
    const key = (n: string) => `${project}/${n}`;
    const missing = names.filter((n) => !this.profileCache.has(key(n)));
    if (!missing.length) return names.map((n) => this.profileCache.get(key(n))!);
    // Callers that miss at once share one read: a boot or a first listing asks for the same profile
    // for each of thousands of instances before the first answer is back.
    const starting = missing.filter((n) => !this.profileLoads.has(key(n)));
    if (starting.length) {
      const generation = this.profileGeneration;
      const loading = this.deps.profiles.load(project, starting);
      const shared = new Map(starting.map((n, i) => [key(n), loading.then((found) => found[i]!)]));
      for (const [k, p] of shared) this.profileLoads.set(k, p);
      // A profile change meanwhile: what was read may be old, so it is not kept (the callers still get it, as before).
      loading.then((found) => generation === this.profileGeneration && found.forEach((p) => this.profileCache.set(key(p.name), p)), () => {})
        .finally(() => shared.forEach((p, k) => this.profileLoads.get(k) === p && this.profileLoads.delete(k)));
    }
    const loaded = new Map<string, Profile>();
    await Promise.all(missing.map(async (n) => loaded.set(n, await this.profileLoads.get(key(n))!)));
    return names.map((n) => loaded.get(n) ?? this.profileCache.get(key(n))!);
  }

  /** `elsewhere`: the instance is another member's; its volume is not here, so no path is looked up (listings). */
  async handleFor(stored: StoredDoc<InstanceRecord>, opts: { elsewhere?: boolean } = {}): Promise<InstanceHandle> {
    const record = stored.doc;
    const project = stored.project;
    const profiles = await this.loadProfiles(project, record.profiles).catch(() => [] as Profile[]);
    // A pool whose driver is absent must not break listings: the instance then reports an error status.
    const volumePath = opts.elsewhere ? '' : await this.volumePathOf(record.pool, record.type, project, record.name).catch(() => '');
    const inst: DriverInstance = {
      project,
      name: record.name,
      type: record.type,
      architecture: record.architecture,
      config: expandConfig(profiles, record.config),
      devices: expandDevices(profiles, record.devices),
      volumePath,
      logDir: this.logDir(project, record.name),
    };
    return { project, name: record.name, record, rev: stored.rev, inst, driver: this.driverFor(record.type), rootfs: path.join(volumePath, 'rootfs'), location: locationOf(this.ctx.cluster, record) };
  }

  /**
   * A handle to read only, kept with its record's document while that document lives (see
   * ListingViews): for walks over every instance (listings, the snapshot schedule, the boot), which
   * would otherwise build thousands of handles each time. In a cluster every read is a new document.
   */
  readHandle(stored: StoredDoc<InstanceRecord>): Promise<InstanceHandle> {
    return this.ctx.cluster.enabled ? this.handleFor(stored) : this.views.handle(stored, () => this.handleFor(stored));
  }

  /**
   * Where an instance's volume lives: fixed by its pool, type, project and name (a rename or move is
   * another key), so asked of the storage family once. Each answer there reads and parses the pool's
   * record: 10,000 times at a boot or at the first listing of 10,000 instances. Pool changes empty it.
   */
  private volumePathOf(pool: string, type: InstanceType, project: string, name: string): Promise<string> {
    const key = `${pool}\0${type}\0${project}\0${name}`;
    const known = this.volumePaths.get(key);
    if (known !== undefined) return Promise.resolve(known);
    return this.deps.storage.volumePath(pool, { type, project, name }).then((found) => {
      // Bounded: names come and go over a daemon's life.
      if (this.volumePaths.size >= VOLUME_PATHS_MAX) this.volumePaths.clear();
      this.volumePaths.set(key, found);
      return found;
    });
  }

  /**
   * The records of the instances this server holds (all of them on a standalone server), from the
   * index: shared documents, not to be changed (a write goes through `touch`).
   */
  async localRecords(project?: string): Promise<StoredDoc<InstanceRecord>[]> {
    const all = await this.index.list(project);
    return this.ctx.cluster.enabled ? all.filter((s) => isHere(this.ctx.cluster, s.doc)) : all;
  }

  /** Whether this server holds the instance `name` (false when there is none). */
  async holds(project: string, name: string): Promise<boolean> {
    const stored = await this.records.get(project, name);
    return !!stored && isHere(this.ctx.cluster, stored.doc);
  }

  async load(project: string, name: string): Promise<InstanceHandle> {
    const stored = await this.records.get(project, name);
    if (!stored) throw notFound('Instance not found');
    return this.handleFor(stored);
  }

  lifecycle(action: string, handle: { project: string; name: string }, req: ApiRequest | undefined, context?: Record<string, unknown>): void {
    this.ctx.events.lifecycle(action, instanceUrl(handle.project, handle.name), { project: handle.project, requestor: req?.requestor, context });
  }

  /**
   * Everything that can be checked before any work starts: names, profiles, keys, devices, the
   * root disk. Returns the expanded view and the pool of the root disk.
   */
  async check(
    project: string, type: InstanceType, edit: InstanceEdit, vet?: InstanceVet, loaded?: Profile[],
  ): Promise<{ pool: string; config: Record<string, string>; devices: Record<string, DeviceConfig> }> {
    const driver = this.driverFor(type);
    // `loaded`: the profiles as they would be (a profile edit checks the instances that use it).
    const profiles = loaded ?? await this.loadProfiles(project, edit.profiles);
    const config = expandConfig(profiles, edit.config);
    const devices = expandDevices(profiles, edit.devices);
    this.ctx.keys.validate('instance', edit.config);
    await driver.validate?.(config);
    this.deps.devices.validate(devices, { instanceType: type, profile: false, project });
    await checkDevices(this.deps.devices, devices, { instanceType: type, profile: false, project });
    driver.validateDevices?.(devices);
    const roots = Object.values(devices).filter(isRootDisk);
    if (roots.length === 0) throw badRequest('No root disk device: add one to the instance or a profile (type=disk path=/ pool=<pool>)');
    if (roots.length > 1) throw badRequest('More than one root disk device');
    await this.deps.storage.pool(roots[0].pool);
    // The project's restrictions and limits see the instance as it would be, profiles applied.
    if (vet) await this.ctx.services.get(ProjectsServiceRef)?.vet({ kind: 'instance', project, type, config, devices, ...vet });
    return { pool: roots[0].pool, config, devices };
  }

  /** The project policy gate for what is made from an instance (`restricted.snapshots`, `restricted.backups`). */
  async vetChild(kind: 'snapshot' | 'backup', handle: { project: string; name: string }): Promise<void> {
    await this.ctx.services.get(ProjectsServiceRef)?.vet({ kind, project: handle.project, instance: handle.name });
  }

  /** Reserve the name now so that a concurrent create of the same name gets 409 at once. */
  async reserve(project: string, name: string): Promise<() => void> {
    const key = `${project}/${name}`;
    if (this.reserved.has(key) || (await this.records.get(project, name))) throw conflict(`Instance "${name}" already exists`);
    this.reserved.add(key);
    return () => this.reserved.delete(key);
  }

  /** Volume first, record last: a crash in between leaves only a volume, which boot cleanup removes. */
  async create(spec: CreateSpec, pool: string, req?: ApiRequest): Promise<InstanceHandle> {
    const driver = this.driverFor(spec.type);
    const vol = { type: spec.type, project: spec.project, name: spec.name };
    const now = new Date().toISOString();
    const record: InstanceRecord = {
      name: spec.name,
      type: spec.type,
      architecture: spec.architecture,
      description: spec.description,
      config: { ...spec.config, ...spec.extraConfig },
      devices: spec.devices,
      profiles: spec.profiles,
      ephemeral: spec.ephemeral,
      stateful: false,
      created_at: now,
      last_used_at: NEVER,
      pool,
    };
    // In a cluster the member that creates is the one that holds the volume and runs the instance.
    if (this.ctx.cluster.enabled) record.location = this.ctx.cluster.serverName;
    record.config['volatile.uuid'] ??= randomUUID();
    const creatingProfiles = await this.loadProfiles(spec.project, spec.profiles);
    const devices = expandDevices(creatingProfiles, spec.devices);
    this.hooks.creating.call({ project: spec.project, name: spec.name, type: spec.type, origin: spec.origin, config: record.config, devices });
    record.config['volatile.last_state.power'] = 'STOPPED';
    // A container that runs without an id map may share its image's files (decision 0075).
    const source = spec.source.kind === 'image' ? { ...spec.source, layered: mayShareImage(spec.type, expandConfig(creatingProfiles, record.config)) } : spec.source;
    const volumePath = await this.deps.storage.createInstanceVolume(pool, vol, source, spec.volumeState);
    let stored: StoredDoc<InstanceRecord> | undefined;
    try {
      await mkdir(this.logsRoot, { recursive: true, mode: LOGS_MODE });
      await mkdir(this.logDir(spec.project, spec.name), { recursive: true });
      const profiles = await this.loadProfiles(spec.project, spec.profiles);
      const draft: DriverInstance = {
        project: spec.project, name: spec.name, type: spec.type, architecture: spec.architecture,
        config: expandConfig(profiles, record.config), devices: expandDevices(profiles, record.devices),
        volumePath, logDir: this.logDir(spec.project, spec.name),
      };
      Object.assign(record.config, await driver.initialize?.(draft, await this.idmapNeighbours(draft)));
      // A failure from here on removes the volume, and with it whatever the taps set on it.
      await this.hooks.devicesChanging.promise({ instance: { ...vol, pool }, before: undefined, after: draft.devices, undo: new Undo() });
      // A plain create is one write; only snapshots carried along need a transaction.
      stored = !spec.snapshots?.length ? await this.records.put(spec.project, spec.name, record, 0) : await this.ctx.store.transaction(async (tx) => {
        const snapshots = tx.collection<SnapshotRecord>('snapshots');
        for (const snap of spec.snapshots ?? []) await snapshots.put(spec.project, snapshotKey(spec.name, snap.name), snap, 0);
        return tx.collection<InstanceRecord>('instances').put(spec.project, spec.name, record, 0);
      });
      const handle = await this.handleFor(stored);
      await handle.driver.secureFiles?.(handle.inst);
      this.lifecycle('instance-created', spec, req, { 'storage-pool': pool, type: spec.type });
      this.follow('created', () => this.hooks.created.call(refOf(handle)));
      return handle;
    } catch (err) {
      if (stored) await this.deleteRecords(spec.project, spec.name).catch(() => {});
      await this.deps.storage.deleteVolume(pool, vol).catch(() => {});
      await rm(this.logDir(spec.project, spec.name), { recursive: true, force: true });
      throw err;
    }
  }

  /**
   * Other instances a driver must keep clear of when it allocates an isolated id map. Only read
   * when the new instance asks for isolation, so mass creation stays linear.
   */
  private async idmapNeighbours(draft: DriverInstance): Promise<DriverInstance[]> {
    if (!truthy(draft.config['security.idmap.isolated'])) return [];
    return (await this.records.list()).map((s) => ({
      project: s.project, name: s.name, type: s.doc.type, architecture: s.doc.architecture,
      config: s.doc.config, devices: s.doc.devices, volumePath: '', logDir: '',
    }));
  }

  async update(handle: InstanceHandle, edit: InstanceEdit, running: boolean, req?: ApiRequest): Promise<void> {
    const checked = await this.check(handle.project, handle.record.type, edit, { action: 'update', name: handle.name, replaces: handle.name });
    if (checked.pool !== handle.record.pool) throw badRequest('The root disk cannot move to another pool by editing the instance');
    const before = handle.inst.config;
    // Volatile keys are the daemon's: a client echoing an old copy must not roll them back.
    const config = { ...edit.config };
    for (const [k, v] of Object.entries(handle.record.config)) if (k.startsWith('volatile.') && !(k in config)) config[k] = v;
    this.hooks.updating.call({ instance: handle, before: handle.inst.devices, after: checked.devices, config });
    const undo = new Undo();
    try {
      await this.hooks.devicesChanging.promise({ instance: refOf(handle), before: handle.inst.devices, after: checked.devices, undo });
      if (running) {
        const changed = liveChanges(before, checked.config);
        if (Object.keys(changed).length) await handle.driver.update?.(handle.inst, changed);
        // Devices of hot-pluggable types (NICs, proxies, disks) follow the edit at once.
        applyVolatile(config, await this.deviceRuntime.hotplug(handle, handle.inst.devices, checked.devices, { ...checked.config, ...config }));
      }
      const record: InstanceRecord = { ...handle.record, ...edit, config };
      await this.records.put(handle.project, handle.name, record, handle.rev);
    } catch (err) {
      await undo.run();
      throw err;
    }
    // A privilege or id map change changes who may enter the instance's directory.
    if (handle.driver.secureFiles) await handle.driver.secureFiles((await this.load(handle.project, handle.name)).inst);
    this.lifecycle('instance-updated', handle, req);
    this.follow('updated', () => this.hooks.updated.call(refOf(handle)));
  }

  async remove(handle: InstanceHandle, req?: ApiRequest): Promise<void> {
    if (truthy(handle.inst.config['security.protection.delete'])) {
      throw badRequest('Instance is protected from deletion (security.protection.delete)');
    }
    // Record first: after a crash a volume without a record is a leftover the boot cleanup removes.
    await this.deleteRecords(handle.project, handle.name);
    // What is left lives in separate places (the followers' own, the driver's directory, the volume, the
    // logs): removed side by side. The followers' and the driver's failures are logged, as before; the
    // volume's and the logs' are the request's.
    const [volume, logs] = await Promise.allSettled([
      this.deps.storage.deleteVolume(handle.record.pool, { type: handle.record.type, project: handle.project, name: handle.name }),
      rm(handle.inst.logDir, { recursive: true, force: true }),
      this.hooks.removed.promise(refOf(handle)).catch((err) => this.ctx.log.error({ err, instance: handle.name }, 'a follower of the instance removal failed')),
      handle.driver.remove(handle.inst).catch((err) => this.ctx.log.warn({ err }, 'driver cleanup failed')),
    ]);
    for (const step of [volume, logs]) if (step.status === 'rejected') throw step.reason;
    this.lifecycle('instance-deleted', handle, req);
  }

  /** `cause` `pool-move` for the rename that ends a pool move (the reference owes no rename templates there). */
  async rename(handle: InstanceHandle, newName: string, req?: ApiRequest, cause: 'rename' | 'pool-move' = 'rename'): Promise<InstanceHandle> {
    const renamed = await this.relocate(handle, handle.project, newName, cause);
    this.ctx.events.lifecycle('instance-renamed', instanceUrl(renamed.project, newName), { project: renamed.project, requestor: req?.requestor, context: { old_name: handle.name } });
    return renamed;
  }

  /**
   * Move a stopped instance to another project (`instance_project_move`), under `newName`: its
   * volume, snapshots, records, logs and backups follow. For the clients it is a copy into the
   * target project and a delete of the source, as the reference reports it.
   */
  async moveToProject(handle: InstanceHandle, project: string, newName: string, req?: ApiRequest): Promise<InstanceHandle> {
    const moved = await this.relocate(handle, project, newName, 'project-move');
    this.lifecycle('instance-created', moved, req, { 'storage-pool': moved.record.pool, type: moved.record.type });
    this.lifecycle('instance-deleted', handle, req);
    return moved;
  }

  /** The shared part of a rename and a project move; every step is undone when a later one fails. */
  private async relocate(handle: InstanceHandle, project: string, newName: string, cause: InstanceMoveCause): Promise<InstanceHandle> {
    const release = await this.reserve(project, newName);
    const { pool, type } = handle.record;
    const from = handle.project;
    const move = { from: refOf(handle), to: { project, name: newName, type, pool }, cause };
    try {
      await handle.driver.remove(handle.inst);
      await this.deps.storage.renameVolume(pool, { type, project: from, name: handle.name }, newName, project);
      try {
        await renameFile(handle.inst.logDir, this.logDir(project, newName)).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== 'ENOENT') throw err;
        });
        await this.ctx.store.transaction(async (tx) => {
          const records = tx.collection<InstanceRecord>('instances');
          const stored = await records.rename(from, handle.name, project, newName);
          const config = { ...stored.doc.config };
          this.hooks.renaming.call({ ...move, config });
          await records.put(project, newName, { ...stored.doc, name: newName, config }, stored.rev);
          const snapshots = tx.collection<SnapshotRecord>('snapshots');
          for (const snap of await snapshots.list(from, `${handle.name}/`)) {
            await snapshots.rename(from, snap.name, project, snapshotKey(newName, snap.doc.name));
          }
        });
      } catch (err) {
        await renameFile(this.logDir(project, newName), handle.inst.logDir).catch(() => {});
        await this.deps.storage.renameVolume(pool, { type, project, name: newName }, handle.name, from).catch(() => {});
        throw err;
      }
      await this.hooks.renamed.promise(move).catch((err) => this.ctx.log.error({ err, instance: handle.name }, 'a follower of the instance rename failed'));
    } finally {
      release();
    }
    return this.load(project, newName);
  }

  /** Forget an instance whose member is gone for good (a member removed by force): records only. */
  async forgetRecords(project: string, name: string): Promise<void> {
    await this.deleteRecords(project, name);
  }

  /** The instance record and its snapshot records, together. */
  private async deleteRecords(project: string, name: string): Promise<void> {
    if (!(await this.ctx.store.collection('snapshots').list(project, `${name}/`)).length) {
      await this.records.delete(project, name);
      return;
    }
    await this.ctx.store.transaction(async (tx) => {
      const snapshots = tx.collection<SnapshotRecord>('snapshots');
      for (const snap of await snapshots.list(project, `${name}/`)) await snapshots.delete(project, snap.name);
      await tx.collection<InstanceRecord>('instances').delete(project, name);
    });
  }

  /** Past-tense hooks: the change is done; a tap that fails is logged, never the caller's failure. */
  follow(hook: string, call: () => void): void {
    try {
      call();
    } catch (err) {
      this.ctx.log.error({ err, hook }, 'an instance hook tap failed');
    }
  }

  /** Set keys without going through validation (volatile state, last_used_at). */
  async touch(project: string, name: string, change: (record: InstanceRecord) => void): Promise<void> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const stored = await this.records.get(project, name);
      if (!stored) return;
      const record = structuredClone(stored.doc);
      change(record);
      try {
        await this.records.put(project, name, record, stored.rev);
        return;
      } catch (err) {
        if ((err as { status?: number }).status !== 412) throw err;
      }
    }
  }
}
