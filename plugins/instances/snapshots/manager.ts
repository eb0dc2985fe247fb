/**
 * Instance snapshots: records in the `snapshots` collection (key `<instance>/<snapshot>`) and
 * the storage snapshots of the instance volume. Storage first, record last on create; record
 * first, storage last on delete, so after a crash a storage snapshot may lack a record (removed
 * at boot) but a record never lacks its storage.
 */
import {
  badRequest, notFound, resourceUrl,
  type ApiRequest, type Collection, type PluginContext, type StoredDoc, type VolumeRef,
} from '../../../sdk/index.js';
import type { InstanceHandle } from '../access.js';
import { expandConfig, expandDevices } from '../expand.js';
import type { InstanceManager } from '../manager.js';
import { NEVER } from '../record.js';
import { groupByInstance, type ChildLister } from '../children.js';
import { expiryFrom } from '../../../sdk/lib/snapshots/expiry.js';
import { checkSnapshotName, nextSnapshotName } from '../../../sdk/lib/snapshots/pattern.js';
import { NO_EXPIRY, hasExpiry, snapshotKey, type SnapshotRecord } from './record.js';

export interface SnapshotRequest {
  name?: string;
  /** ISO time; undefined: from `snapshots.expiry`. */
  expiresAt?: string;
}

export const snapshotUrl = (project: string, instance: string, snapshot: string) =>
  resourceUrl(`/1.0/instances/${encodeURIComponent(instance)}/snapshots/${encodeURIComponent(snapshot)}`, project);

/**
 * `0001-01-01T00:00:00Z` and null disable expiry; anything else must be a time. An empty string
 * is no time: refused, as the reference refuses it.
 */
export function parseExpiresAt(value: unknown): string {
  if (value === undefined || value === null) return NO_EXPIRY;
  if (typeof value !== 'string' || value === '') throw badRequest('"expires_at" must be a time (RFC 3339), "0001-01-01T00:00:00Z" for never, or null');
  if (value.startsWith('0001-01-01')) return NO_EXPIRY;
  const time = Date.parse(value);
  if (Number.isNaN(time)) throw badRequest(`Invalid "expires_at" time "${value}"`);
  return value;
}

const byCreation = (a: StoredDoc<SnapshotRecord>, b: StoredDoc<SnapshotRecord>) =>
  a.doc.created_at.localeCompare(b.doc.created_at) || a.name.localeCompare(b.name);

export class SnapshotManager {
  readonly records: Collection<SnapshotRecord>;

  constructor(private readonly ctx: PluginContext, private readonly instances: InstanceManager) {
    this.records = ctx.store.collection<SnapshotRecord>('snapshots');
  }

  private volume(handle: InstanceHandle): VolumeRef {
    return { type: handle.record.type, project: handle.project, name: handle.name };
  }

  /** Oldest first (creation order), as the reference lists them. */
  async list(handle: { project: string; name: string }): Promise<StoredDoc<SnapshotRecord>[]> {
    return (await this.records.list(handle.project, `${handle.name}/`)).sort(byCreation);
  }

  /** Snapshot views for recursion=2 listings. */
  lister(): ChildLister {
    return {
      of: async (handle) => Promise.all((await this.list(handle)).map((s) => this.view(handle, s))),
      all: async (project) => groupByInstance(await this.records.list(project), byCreation, (s) => this.view(s, s)),
    };
  }

  async load(handle: { project: string; name: string }, snapshot: string): Promise<StoredDoc<SnapshotRecord>> {
    const stored = await this.records.get(handle.project, snapshotKey(handle.name, snapshot));
    if (!stored) throw notFound('Snapshot not found');
    return stored;
  }

  path(handle: InstanceHandle, snapshot: string): Promise<string> {
    return this.instances.deps.storage.snapshotPath(handle.record.pool, this.volume(handle), snapshot);
  }

  /** Bytes held by the snapshot, -1 when the driver cannot tell cheaply (as the reference shows on dir). */
  async size(handle: InstanceHandle, snapshot: string): Promise<number> {
    const usage = await this.instances.deps.storage.snapshotUsage(handle.record.pool, this.volume(handle), snapshot).catch(() => undefined);
    return usage ?? -1;
  }

  /** Snapshot name and expiry, checked before any work (the name is free, the expiry parses). */
  async plan(handle: InstanceHandle, request: SnapshotRequest, now = new Date()): Promise<{ name: string; expiresAt: string }> {
    const existing = (await this.list(handle)).map((s) => s.doc.name);
    let name = request.name;
    if (name === undefined || name === '') {
      name = nextSnapshotName(handle.inst.config['snapshots.pattern'] || 'snap%d', existing, now);
    }
    checkSnapshotName(name);
    if (existing.includes(name)) throw badRequest(`Snapshot "${name}" already exists`);
    let expiresAt = request.expiresAt;
    if (expiresAt === undefined) {
      const expiry = expiryFrom(handle.inst.config['snapshots.expiry'] ?? '', now);
      expiresAt = expiry ? expiry.toISOString() : NO_EXPIRY;
    }
    return { name, expiresAt };
  }

  async create(handle: InstanceHandle, request: SnapshotRequest, req?: ApiRequest): Promise<SnapshotRecord> {
    const now = new Date();
    const { name, expiresAt } = await this.plan(handle, request, now);
    const r = handle.record;
    const record: SnapshotRecord = {
      name,
      architecture: r.architecture,
      config: { ...r.config },
      devices: structuredClone(r.devices),
      ephemeral: r.ephemeral,
      profiles: [...r.profiles],
      stateful: false,
      description: r.description,
      created_at: now.toISOString(),
      expires_at: expiresAt,
      last_used_at: NEVER,
    };
    const storage = this.instances.deps.storage;
    await storage.createSnapshot(r.pool, this.volume(handle), name);
    try {
      await this.records.put(handle.project, snapshotKey(handle.name, name), record, 0);
    } catch (err) {
      await storage.deleteSnapshot(r.pool, this.volume(handle), name).catch(() => {});
      throw err;
    }
    this.lifecycle('instance-snapshot-created', handle, name, req);
    return record;
  }

  async remove(handle: InstanceHandle, snapshot: string, req?: ApiRequest): Promise<void> {
    await this.load(handle, snapshot);
    await this.records.delete(handle.project, snapshotKey(handle.name, snapshot));
    await this.instances.deps.storage.deleteSnapshot(handle.record.pool, this.volume(handle), snapshot);
    this.lifecycle('instance-snapshot-deleted', handle, snapshot, req);
  }

  async rename(handle: InstanceHandle, snapshot: string, newName: string, req?: ApiRequest): Promise<void> {
    checkSnapshotName(newName);
    const stored = await this.load(handle, snapshot);
    if (await this.records.get(handle.project, snapshotKey(handle.name, newName))) throw badRequest(`Snapshot "${newName}" already exists`);
    const storage = this.instances.deps.storage;
    await storage.renameSnapshot(handle.record.pool, this.volume(handle), snapshot, newName);
    try {
      await this.ctx.store.transaction(async (tx) => {
        const records = tx.collection<SnapshotRecord>('snapshots');
        const moved = await records.rename(handle.project, snapshotKey(handle.name, snapshot), handle.project, snapshotKey(handle.name, newName));
        await records.put(handle.project, snapshotKey(handle.name, newName), { ...stored.doc, name: newName }, moved.rev);
      });
    } catch (err) {
      await storage.renameSnapshot(handle.record.pool, this.volume(handle), newName, snapshot).catch(() => {});
      throw err;
    }
    this.lifecycle('instance-snapshot-renamed', handle, newName, req, { old_name: snapshot });
  }

  async setExpiry(handle: InstanceHandle, snapshot: string, expiresAt: string, req?: ApiRequest): Promise<void> {
    const stored = await this.load(handle, snapshot);
    await this.records.put(handle.project, stored.name, { ...stored.doc, expires_at: expiresAt }, stored.rev);
    this.lifecycle('instance-snapshot-updated', handle, snapshot, req);
  }

  /**
   * The instance's volume and config become the snapshot's. Volatile keys stay the instance's
   * own (its identity and id map are not rolled back), except the templates a start still owes:
   * those belong to the files restored, so they come back with them, as in the reference.
   */
  async restore(handle: InstanceHandle, snapshot: string, req?: ApiRequest): Promise<void> {
    const stored = await this.load(handle, snapshot);
    const snap = stored.doc;
    await this.instances.deps.storage.restoreSnapshot(handle.record.pool, this.volume(handle), snapshot);
    const config = Object.fromEntries(Object.entries(snap.config).filter(([k]) => !k.startsWith('volatile.')));
    for (const [k, v] of Object.entries(handle.record.config)) if (k.startsWith('volatile.')) config[k] = v;
    this.instances.hooks.restoring.call({ instance: handle, snapshot, snapshotConfig: snap.config, config });
    await this.instances.touch(handle.project, handle.name, (r) => {
      r.architecture = snap.architecture;
      r.config = config;
      r.devices = structuredClone(snap.devices);
      r.profiles = [...snap.profiles];
      r.ephemeral = snap.ephemeral;
      r.description = snap.description;
    });
    this.instances.lifecycle('instance-restored', handle, req, { snapshot });
  }

  /** The wire form: the snapshot with its expanded config and devices (profiles as they are now). */
  async view(handle: { project: string }, stored: StoredDoc<SnapshotRecord>, size = -1) {
    const s = stored.doc;
    const profiles = await this.instances.loadProfiles(handle.project, s.profiles).catch(() => []);
    return {
      architecture: s.architecture,
      config: s.config,
      created_at: s.created_at,
      devices: s.devices,
      ephemeral: s.ephemeral,
      expanded_config: expandConfig(profiles, s.config),
      expanded_devices: expandDevices(profiles, s.devices),
      expires_at: hasExpiry(s.expires_at) ? s.expires_at : NO_EXPIRY,
      last_used_at: s.last_used_at,
      name: s.name,
      profiles: s.profiles,
      size,
      stateful: s.stateful,
    };
  }

  private lifecycle(action: string, handle: { project: string; name: string }, snapshot: string, req?: ApiRequest, context?: Record<string, unknown>): void {
    this.ctx.events.lifecycle(action, snapshotUrl(handle.project, handle.name, snapshot), { project: handle.project, requestor: req?.requestor, context });
  }
}
