/**
 * Custom volume backups: records in the `volume-backups` collection (key
 * `<pool>/<volume>/<backup>`, in the volume's project) and their tarballs at
 * `<backups dir>/custom/<pool>/<project>_<volume>/<backup>`, as the reference lays them out (the
 * backups dir is `<dataDir>/backups` or the volume `storage.backups_volume` names).
 * The file first, the record last on create; the record first, the file last on delete; a rename
 * links the new name before the record moves. A crash leaves at worst a file without a record or a
 * work area, which the boot cleanup removes. Backups follow their volume when it is renamed or
 * moved and go with it when it is deleted.
 */
import { randomUUID } from 'node:crypto';
import { link, mkdir, readdir, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { yaml } from '../../../sdk/lib/yaml/index.js';
import {
  daemonStorageDir, badRequest, conflict, KeyedLock, notFound, resourceUrl, type OperationControl,
  type PluginContext, type Requestor, type StoredDoc,
} from '../../../sdk/index.js';
import {
  backupExpired, backupTime, checkBackupName, sendOptimizedParts, type BackupAlgorithm, type BackupTarballPart,
} from '../../../sdk/lib/backup/index.js';
import { planBackupRequest, removeBackupFile, removeUnrecordedBackupFiles, renameBackupFile, storeBackupFile } from '../../../sdk/lib/backup/store.js';
import type { PoolManager } from '../pools.js';
import type { VolumeManager } from '../volumes.js';
import { SNAPSHOTS_PART, VOLUME_OPTIMIZED_LAYOUT, VOLUME_PART } from './backup-archive.js';
import type { VolumeCatalog } from './catalog.js';
import { customRef } from './custom-volumes.js';
import { customView, NEVER } from './record.js';

export interface VolumeBackupRecord {
  name: string;
  created_at: string;
  /** `0001-01-01T00:00:00Z` when it never expires. */
  expires_at: string;
  volume_only: boolean;
  optimized_storage: boolean;
  compression_algorithm: string;
}

export interface VolumeBackupRequest {
  name: string;
  expiresAt: string;
  volumeOnly: boolean;
  /** Asked for the pool driver's own format (used when the driver has one). */
  optimized: boolean;
  algorithm: BackupAlgorithm;
}

/** A custom volume: its pool, its project and its name. */
export interface VolumeOwner {
  pool: string;
  project: string;
  name: string;
}

export const VOLUME_BACKUPS_COLLECTION = 'volume-backups';

const key = (owner: VolumeOwner, backup: string) => `${owner.pool}/${owner.name}/${backup}`;
const SCRATCH = /^\.custom-(import|create)-[0-9a-f-]{36}$/;

export const volumeBackupView = (r: VolumeBackupRecord) => ({
  name: r.name, created_at: r.created_at, expires_at: r.expires_at, volume_only: r.volume_only, optimized_storage: r.optimized_storage,
});

export const volumeBackupUrl = (owner: VolumeOwner, backup: string) =>
  resourceUrl(`/1.0/storage-pools/${encodeURIComponent(owner.pool)}/volumes/custom/${encodeURIComponent(owner.name)}/backups/${encodeURIComponent(backup)}`, owner.project);

/** YAML as the reference's encoder writes it: block style, strings quoted only when they must be. */
const toYaml = (doc: unknown) => yaml().stringify(doc, { lineWidth: 0, aliasDuplicateObjects: false, indentSeq: false });

export class VolumeBackups {
  private readonly reserved = new Set<string>();
  private readonly lock = new KeyedLock();

  constructor(
    private readonly ctx: PluginContext, private readonly pools: PoolManager, private readonly volumes: VolumeManager, private readonly catalog: VolumeCatalog,
  ) {
  }

  /** Asked for on every use: daemon storage can move it. */
  get root(): string {
    return daemonStorageDir(this.ctx, 'backups');
  }

  get customRoot(): string {
    return path.join(this.root, 'custom');
  }

  private get stagingMount(): string {
    return path.join(this.root, '.staging-custom');
  }

  private get records() {
    return this.ctx.store.collection<VolumeBackupRecord>(VOLUME_BACKUPS_COLLECTION);
  }

  dirOf(owner: VolumeOwner): string {
    return path.join(this.customRoot, owner.pool, `${owner.project}_${owner.name}`);
  }

  file(owner: VolumeOwner, backup: string): string {
    return path.join(this.dirOf(owner), backup);
  }

  /** A private work area beside the backups (same filesystem as the data dir). */
  async scratch(kind: 'import' | 'create'): Promise<string> {
    await mkdir(this.root, { recursive: true, mode: 0o700 });
    const dir = path.join(this.root, `.custom-${kind}-${randomUUID()}`);
    await mkdir(dir, { mode: 0o700 });
    return dir;
  }

  /** 404 naming the pool when it does not exist, as the reference answers before looking for the volume. */
  async checkPool(pool: string): Promise<void> {
    await this.pools.get(pool);
  }

  private volume(owner: VolumeOwner) {
    const entry = this.catalog.find(owner.project, owner.pool, owner.name);
    if (!entry) throw notFound(`Storage volume "${owner.name}" not found on pool "${owner.pool}"`);
    return entry;
  }

  async list(owner: VolumeOwner): Promise<StoredDoc<VolumeBackupRecord>[]> {
    this.volume(owner);
    const stored = await this.records.list(owner.project, `${owner.pool}/${owner.name}/`);
    return stored.sort((a, b) => (a.doc.name < b.doc.name ? -1 : a.doc.name > b.doc.name ? 1 : 0));
  }

  async load(owner: VolumeOwner, backup: string): Promise<StoredDoc<VolumeBackupRecord>> {
    this.volume(owner);
    const stored = await this.records.get(owner.project, key(owner, backup));
    if (!stored) throw notFound('Storage volume backup not found');
    return stored;
  }

  /** Everything in a create request that can be refused before any work starts. */
  async plan(owner: VolumeOwner, body: Record<string, unknown>): Promise<VolumeBackupRequest> {
    const vol = this.volume(owner);
    if (vol.doc.contentType === 'block') throw badRequest('Backups of block volumes are not supported');
    const taken = new Set((await this.list(owner)).map((s) => s.doc.name));
    const prefix = `${owner.project}\u0000${key(owner, '')}`;
    for (const k of this.reserved) if (k.startsWith(prefix)) taken.add(k.slice(prefix.length));
    const { name, expiresAt, algorithm } = await planBackupRequest(this.ctx, owner.project, body, ['volume_only', 'optimized_storage'], taken);
    return { name, expiresAt, volumeOnly: body.volume_only === true, optimized: body.optimized_storage === true, algorithm };
  }

  /** The optimized backup format of a pool's driver (undefined: none). */
  optimizedFormat(pool: string): Promise<string | undefined> {
    return this.volumes.optimizedFormat(pool);
  }

  /** Hold the name until the create finishes; 409 when it is already held. */
  reserve(owner: VolumeOwner, backup: string): () => void {
    const k = `${owner.project}\u0000${key(owner, backup)}`;
    if (this.reserved.has(k)) throw conflict(`Backup "${backup}" already exists`);
    this.reserved.add(k);
    return () => this.reserved.delete(k);
  }

  /** Backup changes of one volume run one at a time, so a delete never takes the directory a create writes into. */
  private serial<T>(owner: VolumeOwner, fn: () => Promise<T>): Promise<T> {
    return this.lock.run(this.dirOf(owner), fn);
  }

  create(owner: VolumeOwner, request: VolumeBackupRequest, op?: OperationControl, requestor?: Requestor): Promise<VolumeBackupRecord> {
    return this.serial(owner, () => this.write(owner, request, op, requestor));
  }

  private async write(owner: VolumeOwner, request: VolumeBackupRequest, op?: OperationControl, requestor?: Requestor): Promise<VolumeBackupRecord> {
    const now = new Date();
    const vol = this.volume(owner);
    if (await this.records.get(owner.project, key(owner, request.name))) throw conflict(`Backup "${request.name}" already exists`);
    const snapshots = request.volumeOnly ? [] : this.catalog.snapshotsOf(owner.project, owner.pool, owner.name).map((s) => s.doc);
    const { info } = await this.pools.usable(owner.pool);
    const work = await this.scratch('create');
    try {
      const index: Record<string, unknown> = { name: owner.name, backend: info.driver, pool: owner.pool };
      if (snapshots.length) index.snapshots = snapshots.map((s) => s.name);
      const config: Record<string, unknown> = { volume: { ...customView(vol.doc, owner.project, []) } };
      if (snapshots.length) {
        config.volume_snapshots = snapshots.map((s) => ({
          description: s.description, expires_at: s.expiresAt || NEVER, name: s.name, config: s.config, content_type: s.contentType, created_at: s.createdAt,
        }));
      }
      const ref = customRef(owner.project, owner.name);
      // The reference answers a pool without an optimized format with a plain backup.
      const format = request.optimized ? await this.volumes.optimizedFormat(owner.pool) : undefined;
      let parts: BackupTarballPart[] = [];
      let optimizedHeader: string | undefined;
      if (format) {
        const sent = await sendOptimizedParts(this.volumes, owner.pool, ref, snapshots.map((s) => s.name), work, VOLUME_OPTIMIZED_LAYOUT);
        parts = sent.parts;
        optimizedHeader = sent.header;
      } else {
        for (const s of snapshots) parts.push({ member: `${SNAPSHOTS_PART}/${s.name}`, dir: await this.volumes.snapshotPath(owner.pool, ref, s.name) });
        parts.push({ member: VOLUME_PART, dir: await this.volumes.volumePath(owner.pool, ref) });
      }
      Object.assign(index, { optimized: format !== undefined, optimized_header: optimizedHeader !== undefined, type: 'custom', config });
      const indexYaml = path.join(work, 'index.yaml');
      await writeFile(indexYaml, toYaml(index));

      const dir = this.dirOf(owner);
      await mkdir(dir, { recursive: true, mode: 0o700 });
      await mkdir(this.stagingMount, { recursive: true, mode: 0o700 });
      const record: VolumeBackupRecord = {
        name: request.name,
        created_at: backupTime(now),
        expires_at: request.expiresAt,
        volume_only: request.volumeOnly,
        optimized_storage: format !== undefined,
        compression_algorithm: request.algorithm,
      };
      await storeBackupFile(this.ctx,
        { algorithm: request.algorithm, stagingMount: this.stagingMount, indexYaml, optimizedHeader, parts, op },
        path.join(dir, `.partial-${randomUUID()}`), this.file(owner, request.name),
        () => this.records.put(owner.project, key(owner, request.name), record, 0));
      this.lifecycle('storage-volume-backup-created', owner, request.name, requestor);
      return record;
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }

  remove(owner: VolumeOwner, backup: string, requestor?: Requestor): Promise<void> {
    return this.serial(owner, async () => {
      await this.load(owner, backup);
      await this.records.delete(owner.project, key(owner, backup));
      await removeBackupFile(this.file(owner, backup));
      this.lifecycle('storage-volume-backup-deleted', owner, backup, requestor);
    });
  }

  async checkRename(owner: VolumeOwner, backup: string, newName: unknown): Promise<string> {
    // As the reference does, a new name that can never be valid is refused before the backup is looked up.
    if (typeof newName === 'string') checkBackupName(newName);
    await this.load(owner, backup);
    if (typeof newName !== 'string' || newName === '') throw badRequest('The new backup "name" is missing');
    if (newName === backup) throw badRequest('The new name is the current name');
    if (this.reserved.has(`${owner.project}\u0000${key(owner, newName)}`) || await this.records.get(owner.project, key(owner, newName))) {
      throw conflict(`Backup "${newName}" already exists`);
    }
    return newName;
  }

  rename(owner: VolumeOwner, backup: string, newName: string, requestor?: Requestor): Promise<void> {
    return this.serial(owner, () => this.move(owner, backup, newName, requestor));
  }

  private async move(owner: VolumeOwner, backup: string, newName: string, requestor?: Requestor): Promise<void> {
    const stored = await this.load(owner, backup);
    await this.checkRename(owner, backup, newName);
    await renameBackupFile(this.ctx.log, this.file(owner, backup), this.file(owner, newName), () => this.ctx.store.transaction(async (tx) => {
      const records = tx.collection<VolumeBackupRecord>(VOLUME_BACKUPS_COLLECTION);
      const moved = await records.rename(owner.project, stored.name, owner.project, key(owner, newName));
      await records.put(owner.project, moved.name, { ...stored.doc, name: newName }, moved.rev);
    }));
    this.lifecycle('storage-volume-backup-renamed', owner, newName, requestor, { old_name: backup });
  }

  /**
   * The volume was renamed or moved (`to`), or deleted (no `to`): its backups go along. Never
   * throws (the volume change has happened); what a failure leaves is removed at boot.
   */
  follow(from: VolumeOwner, to?: VolumeOwner): Promise<void> {
    return this.serial(from, () => this.followLocked(from, to));
  }

  private async followLocked(from: VolumeOwner, to?: VolumeOwner): Promise<void> {
    try {
      const stored = await this.records.list(from.project, `${from.pool}/${from.name}/`);
      if (to && stored.length) {
        const dir = this.dirOf(to);
        await rm(dir, { recursive: true, force: true });
        await mkdir(dir, { recursive: true, mode: 0o700 });
        for (const s of stored) await link(this.file(from, s.doc.name), this.file(to, s.doc.name));
        await this.ctx.store.transaction(async (tx) => {
          const records = tx.collection<VolumeBackupRecord>(VOLUME_BACKUPS_COLLECTION);
          for (const s of stored) await records.rename(from.project, s.name, to.project, key(to, s.doc.name));
        });
      } else {
        await this.ctx.store.transaction(async (tx) => {
          const records = tx.collection<VolumeBackupRecord>(VOLUME_BACKUPS_COLLECTION);
          for (const s of stored) await records.delete(from.project, s.name);
        });
      }
      await rm(this.dirOf(from), { recursive: true, force: true });
    } catch (err) {
      this.ctx.log.error({ err, volume: from, to }, 'moving or removing the backups of a custom volume failed (the boot cleanup removes what is left)');
    }
  }

  /** Removes expired backups; resolves with how many. */
  async expire(now = Date.now()): Promise<number> {
    let removed = 0;
    for (const stored of await this.records.list()) {
      if (!backupExpired(stored.doc.expires_at, now)) continue;
      const [pool, name] = stored.name.split('/') as [string, string];
      await this.remove({ pool, project: stored.project, name }, stored.doc.name).then(() => removed++, (err) => {
        this.ctx.log.error({ err, backup: stored.name }, 'removing an expired volume backup failed');
      });
    }
    return removed;
  }

  /** Boot: work areas of a crash, records whose volume or tarball is gone, files without a record. */
  async cleanup(): Promise<void> {
    for (const entry of await readdir(this.root).catch(() => [] as string[])) {
      if (!SCRATCH.test(entry)) continue;
      this.ctx.log.warn({ entry }, 'removing a volume backup work area left by a crash');
      await rm(path.join(this.root, entry), { recursive: true, force: true });
    }
    const expected = new Set<string>();
    for (const stored of await this.records.list()) {
      const [pool, name] = stored.name.split('/') as [string, string];
      const owner = { pool, project: stored.project, name };
      const file = this.file(owner, stored.doc.name);
      const present = await stat(file).then((st) => st.isFile(), () => false);
      if (present && this.catalog.find(stored.project, pool, name)) {
        expected.add(file);
        continue;
      }
      this.ctx.log.warn({ project: stored.project, backup: stored.name, present }, 'removing a volume backup record whose volume or tarball is gone');
      await this.records.delete(stored.project, stored.name).catch(() => {});
    }
    const dirs: string[] = [];
    for (const pool of await readdir(this.customRoot).catch(() => [] as string[])) {
      for (const dir of await readdir(path.join(this.customRoot, pool)).catch(() => [] as string[])) dirs.push(path.join(this.customRoot, pool, dir));
    }
    await removeUnrecordedBackupFiles(this.ctx.log, dirs, expected, 'removing a volume backup file that has no record');
  }

  lifecycle(action: string, owner: VolumeOwner, backup: string, requestor?: Requestor, context?: Record<string, unknown>): void {
    this.ctx.events.lifecycle(action, volumeBackupUrl(owner, backup), { project: owner.project, requestor, context });
  }
}
