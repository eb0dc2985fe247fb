/**
 * Snapshots of custom volumes: /volumes/custom/{name}/snapshots[/{snapshot}], restore through
 * PUT `restore` on the volume, and a minute task that takes scheduled snapshots
 * (`snapshots.schedule`, named by `snapshots.pattern`) and removes expired ones (`snapshots.expiry`).
 * The driver holds the content (its snapshot capability); records carry description and expiry.
 */
import {
  badRequest, bodyObject, bodyShape, collection, conflict, empty, featureProjectOf, notFound, objectBody, optionalString,
  ProjectsServiceRef, renameBody, sync,
  type ApiRequest, type PluginContext, type Requestor, type RouteDescriptor,
} from '../../../sdk/index.js';
import type { InstanceVolumeSnapshots } from './instance-volume-snapshots.js';
import { expiryFrom } from '../../../sdk/lib/snapshots/expiry.js';
import { nextSnapshotName } from '../../../sdk/lib/snapshots/pattern.js';
import { parseSchedule } from '../../../sdk/lib/snapshots/schedule.js';
import type { VolumeManager } from '../volumes.js';
import type { VolumeCatalog } from './catalog.js';
import { customRef } from './custom-volumes.js';
import { checkVolumeSnapshotName } from './names.js';
import { NEVER, snapshotView, volumeSnapshotUrl, volumeUrl } from './record.js';
import { volumeTask } from './volume-task.js';

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const apiTime = (date: Date) => `${date.toISOString().slice(0, 19)}Z`;

/** `expires_at` as sent: absent, empty or the zero time mean never (''). */
function parseExpiresAt(value: unknown): string {
  if (value === undefined || value === null || value === '') return '';
  if (typeof value !== 'string') throw badRequest('"expires_at" must be a time (RFC 3339)');
  if (value.startsWith('0001-01-01')) return '';
  if (!RFC3339.test(value) || Number.isNaN(Date.parse(value))) throw badRequest(`Invalid "expires_at" time "${value}" (expected RFC 3339)`);
  return apiTime(new Date(value));
}

export class VolumeSnapshots {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly ctx: PluginContext, private readonly volumes: VolumeManager, private readonly catalog: VolumeCatalog,
    /** Volumes holding the daemon's own files (daemon storage) take no snapshots. */
    private readonly daemonHolds: (project: string, pool: string, name: string) => boolean = () => false,
    /** A volume being migrated keeps its snapshots as they are (waits a moment, then refuses). */
    private readonly awaitMigration: (project: string, pool: string, name: string, doing: string) => Promise<void> = async () => {},
  ) {}

  private volume(project: string, pool: string, name: string) {
    const entry = this.catalog.find(project, pool, name);
    if (!entry) throw notFound(`Storage volume "${name}" not found on pool "${pool}"`);
    return entry;
  }

  get(project: string, pool: string, volume: string, name: string) {
    this.volume(project, pool, volume);
    const entry = this.catalog.findSnapshot(project, pool, volume, name);
    if (!entry) throw notFound(`Snapshot "${name}" of storage volume "${volume}" not found`);
    return entry;
  }

  async create(project: string, pool: string, volume: string, name: string | undefined, expiresAt: string | undefined, requestor?: Requestor): Promise<string> {
    const vol = this.volume(project, pool, volume);
    if (this.daemonHolds(project, pool, volume)) throw badRequest(`Storage volume "${volume}" holds the daemon's own files and cannot have snapshots`);
    await this.ctx.services.get(ProjectsServiceRef)?.vet({ kind: 'snapshot', project, instance: volume });
    const existing = this.catalog.snapshotsOf(project, pool, volume).map((s) => s.doc.name);
    const now = new Date();
    const snapName = name === undefined || name === '' ? nextSnapshotName(vol.doc.config['snapshots.pattern'] ?? '', existing, now) : checkVolumeSnapshotName(name);
    if (existing.includes(snapName)) throw conflict(`Snapshot "${snapName}" of storage volume "${volume}" already exists`);
    const expires = expiresAt ?? (vol.doc.config['snapshots.expiry'] ? expiryFrom(vol.doc.config['snapshots.expiry'], now) : undefined);
    await this.volumes.createSnapshot(pool, customRef(project, volume), snapName);
    try {
      await this.catalog.putSnapshot(project, {
        pool, volume, name: snapName, description: '', config: { ...vol.doc.config }, contentType: vol.doc.contentType,
        createdAt: now.toISOString(), expiresAt: typeof expires === 'string' ? expires : expires ? apiTime(expires) : '',
      }, 0);
    } catch (err) {
      await this.volumes.deleteSnapshot(pool, customRef(project, volume), snapName).catch(() => {});
      throw err;
    }
    this.ctx.events.lifecycle('storage-volume-snapshot-created', volumeSnapshotUrl(pool, volume, snapName, project), { project, requestor });
    return snapName;
  }

  async delete(project: string, pool: string, volume: string, name: string, requestor?: Requestor): Promise<void> {
    this.get(project, pool, volume, name);
    await this.awaitMigration(project, pool, volume, 'have snapshots deleted');
    await this.volumes.deleteSnapshot(pool, customRef(project, volume), name);
    await this.catalog.deleteSnapshot(project, pool, volume, name);
    this.ctx.events.lifecycle('storage-volume-snapshot-deleted', volumeSnapshotUrl(pool, volume, name, project), { project, requestor });
  }

  async rename(project: string, pool: string, volume: string, name: string, newName: string, requestor?: Requestor): Promise<void> {
    this.get(project, pool, volume, name);
    checkVolumeSnapshotName(newName);
    await this.awaitMigration(project, pool, volume, 'have snapshots renamed');
    if (this.catalog.findSnapshot(project, pool, volume, newName)) throw conflict(`Snapshot "${newName}" of storage volume "${volume}" already exists`);
    await this.volumes.renameSnapshot(pool, customRef(project, volume), name, newName);
    try {
      await this.catalog.renameSnapshot(project, pool, volume, name, newName);
    } catch (err) {
      await this.volumes.renameSnapshot(pool, customRef(project, volume), newName, name).catch(() => {});
      throw err;
    }
    this.ctx.events.lifecycle('storage-volume-snapshot-renamed', volumeSnapshotUrl(pool, volume, newName, project), {
      project, requestor, context: { old_name: name },
    });
  }

  async update(project: string, pool: string, volume: string, name: string, edit: { description: string; expiresAt: string }, requestor?: Requestor): Promise<void> {
    const entry = this.get(project, pool, volume, name);
    await this.catalog.putSnapshot(project, { ...entry.doc, description: edit.description, expiresAt: edit.expiresAt }, entry.rev);
    this.ctx.events.lifecycle('storage-volume-snapshot-updated', volumeSnapshotUrl(pool, volume, name, project), { project, requestor });
  }

  async restore(project: string, pool: string, volume: string, name: string, requestor?: Requestor): Promise<void> {
    this.get(project, pool, volume, name);
    await this.awaitMigration(project, pool, volume, 'restored');
    await this.volumes.restoreSnapshot(pool, customRef(project, volume), name);
    this.ctx.events.lifecycle('storage-volume-restored', volumeUrl(pool, 'custom', volume, project), { project, requestor, context: { snapshot: name } });
  }

  /** One minute tick: scheduled snapshots that are due, then expired ones removed. */
  async tick(now = new Date()): Promise<void> {
    for (const vol of this.catalog.all()) {
      const schedule = vol.doc.config['snapshots.schedule'];
      if (!schedule) continue;
      let due = false;
      try {
        due = parseSchedule(schedule, { allowStartup: false }).matches(now);
      } catch {
        continue;
      }
      if (!due) continue;
      await this.runAsOperation('Creating scheduled volume snapshot', vol.project, () =>
        this.create(vol.project, vol.doc.pool, vol.doc.name, undefined, undefined).then(() => undefined));
    }
    for (const vol of this.catalog.all()) {
      for (const snap of this.catalog.snapshotsOf(vol.project, vol.doc.pool, vol.doc.name)) {
        if (!snap.doc.expiresAt || Date.parse(snap.doc.expiresAt) > now.getTime()) continue;
        await this.runAsOperation('Cleaning up expired volume snapshots', vol.project, () =>
          this.delete(vol.project, vol.doc.pool, vol.doc.name, snap.doc.name));
      }
    }
  }

  /** Background work shows as an operation, as the instance scheduler's does. */
  private async runAsOperation(description: string, project: string, fn: () => Promise<void>): Promise<void> {
    const op = this.ctx.operations.create({ class: 'task', description, project, run: async () => { await fn(); } });
    const view = await op.done();
    if (view.err) this.ctx.log.warn({ err: view.err, description }, 'scheduled volume snapshot work failed');
  }

  /** Fires at the start of every minute. */
  start(): void {
    const arm = () => {
      const wait = 60_000 - (Date.now() % 60_000) + 50;
      this.timer = setTimeout(() => {
        this.tick().catch((err) => this.ctx.log.error({ err }, 'volume snapshot tick failed')).finally(arm);
      }, wait);
      this.timer.unref();
    };
    arm();
    this.ctx.hooks.shutdown.tap(async () => {
      if (this.timer) clearTimeout(this.timer);
    });
  }
}

export function snapshotRoutes(ctx: PluginContext, snapshots: VolumeSnapshots, catalog: VolumeCatalog, instanceSnapshots?: InstanceVolumeSnapshots): RouteDescriptor[] {
  const base = '/1.0/storage-pools/{pool}/volumes/{type}/{name}/snapshots';
  const project = (req: ApiRequest) => featureProjectOf(ctx.services, req.project, 'storage.volumes');
  const onlyCustom = (req: ApiRequest) => {
    if (req.params.type !== 'custom') throw badRequest('Snapshots of instance volumes are made, renamed and deleted through their instance');
  };
  /** Instance volume snapshots are shown (and their description edited) here too. */
  const ofInstance = (req: ApiRequest) => {
    if (req.params.type === 'custom') return undefined;
    if (!instanceSnapshots) throw badRequest('Only custom volumes have snapshots through this API');
    return instanceSnapshots;
  };
  const task = (req: ApiRequest, proj: string, description: string, run: () => Promise<void>) =>
    volumeTask(ctx, req, { pool: req.params.pool!, project: proj, name: req.params.name! }, description, run);
  return [
    {
      path: base,
      extension: 'storage_api_volume_snapshots',
      get: {
        description: 'List the snapshots of a custom volume',
        conventions: ['recursion', 'filter'],
        handler: async (req) => {
          const inst = ofInstance(req);
          if (inst) return collection(await inst.list(req), (s) => s.url, (s) => s.view);
          const proj = await project(req);
          if (!catalog.find(proj, req.params.pool!, req.params.name!)) throw notFound(`Storage volume "${req.params.name}" not found`);
          const snaps = catalog.snapshotsOf(proj, req.params.pool!, req.params.name!);
          return collection(snaps, (s) => volumeSnapshotUrl(req.params.pool!, req.params.name!, s.doc.name, proj), (s) => snapshotView(s.doc));
        },
      },
      post: {
        description: 'Snapshot a custom volume',
        errors: [409],
        answers: ['operation'],
        body: objectBody({ name: bodyShape.text, expires_at: bodyShape.text }),
        handler: async (req) => {
          onlyCustom(req);
          const proj = await project(req);
          const body = bodyObject(req.body);
          const name = optionalString(body.name, 'name');
          if (name) checkVolumeSnapshotName(name);
          // lxc sends the zero time when no expiry was asked for: the volume's snapshots.expiry applies then.
          const expiresAt = parseExpiresAt(body.expires_at) || undefined;
          if (!catalog.find(proj, req.params.pool!, req.params.name!)) throw notFound(`Storage volume "${req.params.name}" not found`);
          return task(req, proj, 'Snapshotting storage volume', async () => {
            await snapshots.create(proj, req.params.pool!, req.params.name!, name, expiresAt, req.requestor);
          });
        },
      },
    },
    {
      path: `${base}/{snapshot}`,
      extension: 'storage_api_volume_snapshots',
      current: async (req) => {
        const inst = ofInstance(req);
        if (inst) {
          const v = await inst.get(req);
          return { description: v.description, expires_at: v.expires_at };
        }
        const s = snapshots.get(await project(req), req.params.pool!, req.params.name!, req.params.snapshot!).doc;
        return { description: s.description, expires_at: s.expiresAt || NEVER };
      },
      get: {
        description: 'Show a custom volume snapshot',
        handler: async (req) => {
          const inst = ofInstance(req);
          if (inst) {
            const v = await inst.get(req);
            return sync(v, { etag: { description: v.description, expires_at: v.expires_at } });
          }
          const s = snapshots.get(await project(req), req.params.pool!, req.params.name!, req.params.snapshot!).doc;
          return sync(snapshotView(s), { etag: { description: s.description, expires_at: s.expiresAt || NEVER } });
        },
      },
      put: {
        description: 'Change a custom volume snapshot (description, expires_at)',
        body: objectBody({ description: bodyShape.text, expires_at: bodyShape.text }),
        handler: async (req) => {
          const body = bodyObject(req.body);
          const inst = ofInstance(req);
          if (inst) {
            await inst.describe(req, optionalString(body.description, 'description') ?? '');
            return empty();
          }
          await snapshots.update(await project(req), req.params.pool!, req.params.name!, req.params.snapshot!, {
            description: optionalString(body.description, 'description') ?? '', expiresAt: parseExpiresAt(body.expires_at),
          }, req.requestor);
          return empty();
        },
      },
      post: {
        description: 'Rename a custom volume snapshot',
        errors: [409],
        answers: ['operation'],
        body: renameBody,
        handler: async (req) => {
          onlyCustom(req);
          const proj = await project(req);
          const body = bodyObject(req.body);
          const newName = checkVolumeSnapshotName(body.name);
          snapshots.get(proj, req.params.pool!, req.params.name!, req.params.snapshot!);
          return task(req, proj, 'Renaming storage volume snapshot', () =>
            snapshots.rename(proj, req.params.pool!, req.params.name!, req.params.snapshot!, newName, req.requestor));
        },
      },
      delete: {
        description: 'Delete a custom volume snapshot',
        answers: ['operation'],
        handler: async (req) => {
          onlyCustom(req);
          const proj = await project(req);
          snapshots.get(proj, req.params.pool!, req.params.name!, req.params.snapshot!);
          return task(req, proj, 'Deleting storage volume snapshot', () =>
            snapshots.delete(proj, req.params.pool!, req.params.name!, req.params.snapshot!, req.requestor));
        },
      },
    },
  ];
}
