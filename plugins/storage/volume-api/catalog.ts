/**
 * Custom volume and volume snapshot records, with an in-memory index over them: this plugin is
 * their only writer, so every write goes to the store and then to the index. The index answers
 * synchronously (disk devices validate against it) and lists 1,000 volumes without a store scan.
 */
import type { Collection, PluginContext } from '../../../sdk/index.js';
import { snapshotKey, volumeKey, type CustomVolumeRecord, type VolumeSnapshotRecord } from './record.js';

export interface Entry<T> {
  project: string;
  rev: number;
  doc: T;
}

const indexKey = (project: string, key: string) => `${project}\u0000${key}`;

export class VolumeCatalog {
  private readonly volumes: Collection<CustomVolumeRecord>;
  private readonly snapshots: Collection<VolumeSnapshotRecord>;
  private readonly volumeIndex = new Map<string, Entry<CustomVolumeRecord>>();
  private readonly snapshotIndex = new Map<string, Entry<VolumeSnapshotRecord>>();
  private loaded: Promise<void> | undefined;

  constructor(ctx: PluginContext) {
    this.volumes = ctx.store.collection<CustomVolumeRecord>('custom-volumes');
    this.snapshots = ctx.store.collection<VolumeSnapshotRecord>('custom-volume-snapshots');
  }

  load(): Promise<void> {
    this.loaded ??= (async () => {
      for (const s of await this.volumes.list()) this.volumeIndex.set(indexKey(s.project, s.name), { project: s.project, rev: s.rev, doc: s.doc });
      for (const s of await this.snapshots.list()) this.snapshotIndex.set(indexKey(s.project, s.name), { project: s.project, rev: s.rev, doc: s.doc });
    })().catch((err) => {
      this.loaded = undefined;
      throw err;
    });
    return this.loaded;
  }

  /** Synchronous lookup (the index is loaded at boot). */
  find(project: string, pool: string, name: string): Entry<CustomVolumeRecord> | undefined {
    return this.volumeIndex.get(indexKey(project, volumeKey(pool, name)));
  }

  /** Volumes of a pool (of one project, or of all), sorted by name. */
  list(pool: string | undefined, project?: string): Entry<CustomVolumeRecord>[] {
    const out: Entry<CustomVolumeRecord>[] = [];
    for (const entry of this.volumeIndex.values()) {
      if ((pool === undefined || entry.doc.pool === pool) && (project === undefined || entry.project === project)) out.push(entry);
    }
    return out.sort((a, b) => (a.doc.name < b.doc.name ? -1 : a.doc.name > b.doc.name ? 1 : a.project.localeCompare(b.project)));
  }

  async put(project: string, doc: CustomVolumeRecord, expectedRev?: number): Promise<Entry<CustomVolumeRecord>> {
    const stored = await this.volumes.put(project, volumeKey(doc.pool, doc.name), doc, expectedRev);
    const entry = { project, rev: stored.rev, doc: stored.doc };
    this.volumeIndex.set(indexKey(project, volumeKey(doc.pool, doc.name)), entry);
    return entry;
  }

  async delete(project: string, pool: string, name: string): Promise<void> {
    for (const snap of this.snapshotsOf(project, pool, name)) await this.deleteSnapshot(project, pool, name, snap.doc.name);
    await this.volumes.delete(project, volumeKey(pool, name));
    this.volumeIndex.delete(indexKey(project, volumeKey(pool, name)));
  }

  snapshotsOf(project: string, pool: string, volume: string): Entry<VolumeSnapshotRecord>[] {
    const out: Entry<VolumeSnapshotRecord>[] = [];
    for (const entry of this.snapshotIndex.values()) {
      if (entry.project === project && entry.doc.pool === pool && entry.doc.volume === volume) out.push(entry);
    }
    // Oldest first: copies and exports recreate them in this order.
    return out.sort((a, b) => a.doc.createdAt.localeCompare(b.doc.createdAt) || a.doc.name.localeCompare(b.doc.name));
  }

  findSnapshot(project: string, pool: string, volume: string, name: string): Entry<VolumeSnapshotRecord> | undefined {
    return this.snapshotIndex.get(indexKey(project, snapshotKey(pool, volume, name)));
  }

  async putSnapshot(project: string, doc: VolumeSnapshotRecord, expectedRev?: number): Promise<Entry<VolumeSnapshotRecord>> {
    const key = snapshotKey(doc.pool, doc.volume, doc.name);
    const stored = await this.snapshots.put(project, key, doc, expectedRev);
    const entry = { project, rev: stored.rev, doc: stored.doc };
    this.snapshotIndex.set(indexKey(project, key), entry);
    return entry;
  }

  async deleteSnapshot(project: string, pool: string, volume: string, name: string): Promise<void> {
    await this.snapshots.delete(project, snapshotKey(pool, volume, name));
    this.snapshotIndex.delete(indexKey(project, snapshotKey(pool, volume, name)));
  }

  /** A volume (and its snapshots) under a new name, pool or project, as one move of records. */
  async move(from: { project: string; pool: string; name: string }, to: { project: string; pool: string; name: string }): Promise<void> {
    const entry = this.find(from.project, from.pool, from.name);
    if (!entry) return;
    const snaps = this.snapshotsOf(from.project, from.pool, from.name);
    await this.put(to.project, { ...entry.doc, pool: to.pool, name: to.name }, 0);
    for (const s of snaps) await this.putSnapshot(to.project, { ...s.doc, pool: to.pool, volume: to.name }, 0);
    await this.delete(from.project, from.pool, from.name);
  }

  async renameSnapshot(project: string, pool: string, volume: string, name: string, newName: string): Promise<void> {
    const entry = this.findSnapshot(project, pool, volume, name);
    if (!entry) return;
    await this.putSnapshot(project, { ...entry.doc, name: newName }, 0);
    await this.deleteSnapshot(project, pool, volume, name);
  }

  /** Every project that holds custom volumes (for ProjectsService.contents). */
  all(): Entry<CustomVolumeRecord>[] {
    return [...this.volumeIndex.values()];
  }
}
