/**
 * Instance backups: records in the `backups` collection (key `<instance>/<backup>`) and their
 * tarballs (files.ts). The file first, the record last on create; the record first, the file
 * last on delete; a rename links the new name before the record moves and unlinks the old one
 * after. So a crash leaves at worst a file without a record, which the boot cleanup removes.
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import {
  badRequest, conflict, notFound, resourceUrl, type ApiRequest, type Collection, type OperationControl,
  type PluginContext, type StoredDoc,
} from '../../../sdk/index.js';
import {
  backupTime as apiTime, checkBackupName, sendOptimizedParts, type BackupTarballPart,
  type BackupAlgorithm as Algorithm,
} from '../../../sdk/lib/backup/index.js';
import { planBackupRequest, removeBackupFile, renameBackupFile, storeBackupFile } from '../../../sdk/lib/backup/store.js';
import type { InstanceHandle } from '../access.js';
import type { InstanceManager } from '../manager.js';
import type { SnapshotRecord } from '../snapshots/record.js';
import { backupConfig, indexDocument, snapshotBackupConfig, toYaml } from './backup-config.js';
import { BackupFiles } from './files.js';
import { backupLayout, volumeParts } from './layout.js';
import { backupKey, byName, type BackupRecord } from './record.js';

export interface BackupRequest {
  name: string;
  expiresAt: string;
  instanceOnly: boolean;
  /** Asked for the pool driver's own format (used when the driver has one). */
  optimized: boolean;
  algorithm: Algorithm;
}

/** Where an instance backup keeps its optimized parts, as the reference names them. */
export const INSTANCE_OPTIMIZED_LAYOUT = { snapshot: (name: string) => `backup/snapshots/${name}.bin`, volume: 'backup/container.bin' };

export const backupUrl = (project: string, instance: string, backup: string) =>
  resourceUrl(`/1.0/instances/${encodeURIComponent(instance)}/backups/${encodeURIComponent(backup)}`, project);

export const BACKUPS_COLLECTION = 'backups';

type Owner = { project: string; name: string };

export class BackupManager {
  readonly records: Collection<BackupRecord>;
  readonly files: BackupFiles;
  /** Names being created, so that a second request for one gets 409 at once. */
  private readonly reserved = new Set<string>();

  constructor(private readonly ctx: PluginContext, private readonly instances: InstanceManager) {
    this.records = ctx.store.collection<BackupRecord>(BACKUPS_COLLECTION);
    this.files = new BackupFiles(ctx);
  }

  /** Sorted by name, as the reference lists them. */
  async list(owner: Owner): Promise<StoredDoc<BackupRecord>[]> {
    const stored = await this.records.list(owner.project, `${owner.name}/`);
    return stored.sort(byName);
  }

  async load(owner: Owner, backup: string): Promise<StoredDoc<BackupRecord>> {
    const stored = await this.records.get(owner.project, backupKey(owner.name, backup));
    if (!stored) throw notFound('Instance backup not found');
    return stored;
  }

  file(owner: Owner, backup: string): string {
    return this.files.file(owner.project, owner.name, backup);
  }

  /** Everything in a create request that can be refused before any work starts. */
  async plan(handle: InstanceHandle, body: Record<string, unknown>): Promise<BackupRequest> {
    const taken = new Set((await this.list(handle)).map((s) => s.doc.name));
    for (const key of this.reserved) if (key.startsWith(`${handle.project}/${handle.name}/`)) taken.add(key.slice(handle.project.length + handle.name.length + 2));
    // The project's backups.compression_algorithm (projects_compression) comes before the server's.
    const { name, expiresAt, algorithm } = await planBackupRequest(this.ctx, handle.project, body, ['instance_only', 'container_only', 'optimized_storage'], taken);
    return {
      name,
      expiresAt,
      // Both names mean the same; the reference answers with both set.
      instanceOnly: body.instance_only === true || body.container_only === true,
      optimized: body.optimized_storage === true,
      algorithm,
    };
  }

  /** Hold the name until the create finishes (or fails); 409 when it is already held. */
  reserve(owner: Owner, backup: string): () => void {
    const key = `${owner.project}/${owner.name}/${backup}`;
    if (this.reserved.has(key)) throw conflict(`Backup "${backup}" already exists`);
    this.reserved.add(key);
    return () => this.reserved.delete(key);
  }

  async create(handle: InstanceHandle, request: BackupRequest, op?: OperationControl, req?: ApiRequest): Promise<BackupRecord> {
    const now = new Date();
    if (await this.records.get(handle.project, backupKey(handle.name, request.name))) throw conflict(`Backup "${request.name}" already exists`);
    const snapshots = request.instanceOnly ? [] : await this.snapshotsOf(handle);
    const storage = this.instances.deps.storage;
    const pool = await storage.pool(handle.record.pool);
    const work = await this.files.scratch('create');
    try {
      const config = await backupConfig(this.instances, handle, snapshots);
      const ref = { type: handle.record.type, project: handle.project, name: handle.name };
      // The reference answers a pool without an optimized format with a plain backup.
      // Optimized VM parts (a config stream and a disk stream per volume) are not written yet: a
      // plain backup, as for a pool without an optimized format (decision 0051).
      const format = request.optimized && handle.record.type !== 'virtual-machine' ? await storage.optimizedFormat(handle.record.pool) : undefined;
      let parts: BackupTarballPart[] = [];
      let optimizedHeader: string | undefined;
      if (format) {
        // The reference reads (and rewrites) backup.yaml inside the instance's volume.
        const containerYaml = path.join(work, 'container.yaml');
        await writeFile(containerYaml, toYaml(config), { mode: 0o600 });
        const sent = await sendOptimizedParts(storage, handle.record.pool, ref, snapshots.map((s) => s.doc.name), work, INSTANCE_OPTIMIZED_LAYOUT, { 'backup.yaml': containerYaml });
        parts = sent.parts;
        optimizedHeader = sent.header;
      } else {
        const layout = backupLayout(handle.record.type);
        for (const [i, snap] of snapshots.entries()) {
          const backupYaml = path.join(work, `snapshot-${i}.yaml`);
          await writeFile(backupYaml, toYaml(snapshotBackupConfig(config, snap.doc, i)));
          const dir = await storage.snapshotPath(handle.record.pool, ref, snap.doc.name);
          parts.push(...volumeParts(layout, `${layout.snapshots}/${snap.doc.name}`, dir, backupYaml));
        }
        const containerYaml = path.join(work, 'container.yaml');
        await writeFile(containerYaml, toYaml(config));
        parts.push(...volumeParts(layout, layout.main, handle.inst.volumePath, containerYaml));
      }
      const indexYaml = path.join(work, 'index.yaml');
      await writeFile(indexYaml, toYaml(indexDocument(handle.name, pool, handle.record.type, config, format ? { header: optimizedHeader !== undefined } : undefined)));

      await mkdir(this.files.dirOf(handle.project, handle.name), { recursive: true, mode: 0o700 });
      await this.files.ensure();
      const record: BackupRecord = {
        name: request.name,
        created_at: apiTime(now),
        expires_at: request.expiresAt,
        instance_only: request.instanceOnly,
        container_only: request.instanceOnly,
        // Without an optimized format (dir) the reference ignores the flag.
        optimized_storage: format !== undefined,
        compression_algorithm: request.algorithm,
      };
      await storeBackupFile(this.ctx,
        { algorithm: request.algorithm, stagingMount: this.files.stagingMount, indexYaml, optimizedHeader, parts, op },
        this.files.tempFile(handle.project, handle.name), this.file(handle, request.name),
        () => this.records.put(handle.project, backupKey(handle.name, request.name), record, 0));
      this.lifecycle('instance-backup-created', handle, request.name, req);
      return record;
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }

  async remove(owner: Owner, backup: string, req?: ApiRequest): Promise<void> {
    await this.load(owner, backup);
    await this.records.delete(owner.project, backupKey(owner.name, backup));
    await removeBackupFile(this.file(owner, backup));
    this.lifecycle('instance-backup-deleted', owner, backup, req);
  }

  /** A free, valid new name: checked before the rename's operation starts. */
  async checkRename(owner: Owner, backup: string, newName: unknown): Promise<string> {
    // As the reference does, a new name that can never be valid is refused before the backup is looked up.
    if (typeof newName === 'string') checkBackupName(newName);
    await this.load(owner, backup);
    if (typeof newName !== 'string' || newName === '') throw badRequest('The new backup "name" is missing');
    if (newName === backup) throw badRequest('The new name is the current name');
    const exists = this.reserved.has(`${owner.project}/${owner.name}/${newName}`) || await this.records.get(owner.project, backupKey(owner.name, newName));
    if (exists) throw conflict(`Backup "${newName}" already exists`);
    return newName;
  }

  async rename(owner: Owner, backup: string, newName: string, req?: ApiRequest): Promise<void> {
    const stored = await this.load(owner, backup);
    await this.checkRename(owner, backup, newName);
    await renameBackupFile(this.ctx.log, this.file(owner, backup), this.file(owner, newName), () => this.ctx.store.transaction(async (tx) => {
      const records = tx.collection<BackupRecord>(BACKUPS_COLLECTION);
      const moved = await records.rename(owner.project, stored.name, owner.project, backupKey(owner.name, newName));
      await records.put(owner.project, moved.name, { ...stored.doc, name: newName }, moved.rev);
    }));
    this.lifecycle('instance-backup-renamed', owner, newName, req, { old_name: `${owner.name}/${backup}` });
  }

  /** The instance's snapshots, oldest first. */
  private async snapshotsOf(handle: InstanceHandle): Promise<StoredDoc<SnapshotRecord>[]> {
    const stored = await this.ctx.store.collection<SnapshotRecord>('snapshots').list(handle.project, `${handle.name}/`);
    return stored.sort((a, b) => a.doc.created_at.localeCompare(b.doc.created_at) || a.name.localeCompare(b.name));
  }

  lifecycle(action: string, owner: Owner, backup: string, req?: ApiRequest, context?: Record<string, unknown>): void {
    this.ctx.events.lifecycle(action, backupUrl(owner.project, owner.name, backup), { project: owner.project, requestor: req?.requestor, context });
  }
}
