/**
 * /1.0/storage-pools/{pool}/volumes/custom/{name}/backups (list, create), /backups/{backup}
 * (show, rename, delete), /backups/{backup}/export (download), and the import of a backup
 * tarball posted to /volumes/custom (`lxc storage volume import`). An import is checked whole in
 * the request (archive, index, name, config, project limits), so a bad one is a 400 (409 for a
 * taken name) and leaves nothing; the operation then extracts it into a private work area and
 * creates the volume from it under a scratch name, renamed into place once whole.
 */
import { createReadStream } from 'node:fs';
import { mkdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import {
  async, badRequest, bodyObject, bodyShape, collection, createReleasing, featureProjectOf, notFound, objectBody,
  raw, renameBody, sync, type ApiRequest, type ApiResponse, type OperationControl, type PluginContext,
  type RouteDescriptor, type VolumeSource,
} from '../../../sdk/index.js';
import { formatExtension } from '../../../sdk/lib/archive/index.js';
import {
  backupProgressText, backupUploadAlgorithm, checkOptimizedTarget, extractBackup, moveBackupTree,
  openOptimizedPart, receiveBackupUpload, type BackupAlgorithm,
} from '../../../sdk/lib/backup/index.js';
import { readVolumeIndex, scanVolumeArchive, SNAPSHOTS_PART, VOLUME_OPTIMIZED_LAYOUT, VOLUME_PART, type VolumeBackupIndex } from './backup-archive.js';
import { volumeBackupUrl, volumeBackupView, type VolumeBackups, type VolumeOwner } from './backups.js';
import type { CustomVolumes } from './custom-volumes.js';
import { volumeUrl } from './record.js';

const BASE = '/1.0/storage-pools/{pool}/volumes/{type}/{name}/backups';

function header(value: string | string[] | undefined): string {
  return (Array.isArray(value) ? value[0] : value)?.trim() ?? '';
}

export function volumeBackupRoutes(ctx: PluginContext, backups: VolumeBackups): RouteDescriptor[] {
  const owner = async (req: ApiRequest): Promise<VolumeOwner> => {
    if (req.params.type !== 'custom') throw badRequest('Only custom volumes have backups');
    await backups.checkPool(req.params.pool!);
    return { pool: req.params.pool!, project: await featureProjectOf(ctx.services, req.project, 'storage.volumes'), name: req.params.name! };
  };
  const task = (req: ApiRequest, vol: VolumeOwner, description: string, backup: string, run: (op: OperationControl) => Promise<unknown>, release?: () => void) =>
    async(createReleasing(ctx.operations, {
      class: 'task', description, request: req,
      // lxc 5.0.2 takes the backup name as what follows "/1.0/backups/", as the reference writes it.
      resources: { storage_volumes: [volumeUrl(vol.pool, 'custom', vol.name, vol.project)], backups: [`/1.0/backups/${backup}`] },
      run: async (op) => {
        await run(op);
      },
    }, release));

  return [
    {
      path: BASE,
      extension: 'custom_volume_backup',
      get: {
        description: 'List the backups of a custom volume',
        conventions: ['recursion', 'filter'],
        handler: async (req) => {
          const vol = await owner(req);
          return collection(await backups.list(vol), (s) => volumeBackupUrl(vol, s.doc.name), (s) => volumeBackupView(s.doc));
        },
      },
      post: {
        description: 'Back up a custom volume (and its snapshots) into a tarball',
        errors: [409],
        answers: ['operation'],
        body: objectBody({ name: bodyShape.text, expires_at: bodyShape.text, volume_only: bodyShape.flag, optimized_storage: bodyShape.flag, compression_algorithm: bodyShape.text }),
        handler: async (req) => {
          const vol = await owner(req);
          const request = await backups.plan(vol, bodyObject(req.body));
          const release = backups.reserve(vol, request.name);
          return task(req, vol, 'Backing up storage volume', request.name, (op) => backups.create(vol, request, op, req.requestor), release);
        },
      },
    },
    {
      path: `${BASE}/{backup}`,
      extension: 'custom_volume_backup',
      get: {
        description: 'Show a custom volume backup',
        handler: async (req) => sync(volumeBackupView((await backups.load(await owner(req), req.params.backup!)).doc)),
      },
      post: {
        description: 'Rename a custom volume backup',
        errors: [409],
        answers: ['operation'],
        body: renameBody,
        handler: async (req) => {
          const vol = await owner(req);
          const backup = req.params.backup!;
          const newName = await backups.checkRename(vol, backup, bodyObject(req.body).name);
          return task(req, vol, 'Renaming storage volume backup', newName, () => backups.rename(vol, backup, newName, req.requestor));
        },
      },
      delete: {
        description: 'Delete a custom volume backup',
        answers: ['operation'],
        handler: async (req) => {
          const vol = await owner(req);
          const backup = req.params.backup!;
          await backups.load(vol, backup);
          return task(req, vol, 'Deleting storage volume backup', backup, () => backups.remove(vol, backup, req.requestor));
        },
      },
    },
    {
      path: `${BASE}/{backup}/export`,
      extension: 'custom_volume_backup',
      get: {
        description: 'Download a custom volume backup tarball',
        answers: ['raw'],
        handler: async (req) => {
          const vol = await owner(req);
          const stored = await backups.load(vol, req.params.backup!);
          const file = backups.file(vol, stored.doc.name);
          const st = await stat(file).catch(() => {
            throw notFound('The backup tarball is missing');
          });
          const ext = formatExtension({ kind: 'tar', compression: stored.doc.compression_algorithm as BackupAlgorithm });
          backups.lifecycle('storage-volume-backup-retrieved', vol, stored.doc.name, req.requestor);
          return raw(createReadStream(file), 'application/octet-stream', {
            'Content-Disposition': `inline;filename=${encodeURIComponent(stored.doc.name)}${ext}`,
            'Content-Length': String(st.size),
            'Last-Modified': st.mtime.toUTCString(),
          });
        },
      },
    },
  ];
}

interface ImportPlan {
  vol: VolumeOwner;
  index: VolumeBackupIndex;
  algorithm: BackupAlgorithm;
}

/** What a custom volume is made from in a backup import. */
type ImportSource = Extract<VolumeSource, { kind: 'fill' | 'receive' }>;

/** POST /volumes/custom with a tarball body: checked now, restored by an operation. */
export class VolumeBackupImporter {
  constructor(private readonly ctx: PluginContext, private readonly backups: VolumeBackups, private readonly custom: CustomVolumes) {}

  async post(req: ApiRequest, pool: string, project: string): Promise<ApiResponse> {
    const work = await this.backups.scratch('import');
    let handedOver = false;
    try {
      const upload = path.join(work, 'upload');
      await receiveBackupUpload(req.rawBody, upload);
      const algorithm = await backupUploadAlgorithm(this.ctx.hostTools, upload);
      const index = readVolumeIndex(await scanVolumeArchive(this.ctx.hostTools, upload, algorithm));
      const name = header(req.headers['x-lxd-name']) || index.name;
      await this.custom.checkNew(pool, project, name, index.config, index.contentType);
      if (index.contentType === 'block') throw badRequest('Backups of block volumes are not supported');
      if (index.optimized) checkOptimizedTarget(index.backend, pool, await this.backups.optimizedFormat(pool));
      const plan: ImportPlan = { vol: { pool, project, name }, index, algorithm };
      const op = this.ctx.operations.create({
        class: 'task',
        description: 'Restoring storage volume backup',
        request: req,
        resources: { storage_volumes: [volumeUrl(pool, 'custom', name, project)] },
        run: async (control) => {
          try {
            await this.restore(plan, upload, work, control, req);
          } finally {
            await rm(work, { recursive: true, force: true });
          }
        },
      });
      handedOver = true;
      return async(op);
    } finally {
      if (!handedOver) await rm(work, { recursive: true, force: true });
    }
  }

  private async restore(plan: ImportPlan, upload: string, work: string, op: OperationControl, req: ApiRequest): Promise<void> {
    const tree = path.join(work, 'tree');
    await mkdir(tree, { mode: 0o700 });
    const started = Date.now();
    let reported = 0;
    await extractBackup(this.ctx.hostTools, {
      upload, algorithm: plan.algorithm, into: tree, signal: op.signal,
      onProgress: (read, total) => {
        if (Date.now() - reported < 1000) return;
        reported = Date.now();
        op.updateMetadata({ create_volume_from_backup_progress: backupProgressText(read, started, total) });
      },
    });
    const source = plan.index.optimized ? this.received(plan.index, tree) : await this.extracted(plan.index, tree);
    const { vol, index } = plan;
    await this.custom.createFilled(vol.pool, vol.project, {
      name: vol.name, description: index.description, config: index.config, contentType: index.contentType,
    }, source, index.snapshots, req.requestor);
  }

  /** Plain parts moved into the new volume and its snapshots. */
  private async extracted(index: VolumeBackupIndex, tree: string): Promise<ImportSource> {
    // An empty part may have no member of its own; it is then an empty directory.
    const partDir = async (member: string) => {
      const dir = path.join(tree, member);
      await mkdir(dir, { recursive: true, mode: 0o711 });
      return dir;
    };
    const volumeDir = await partDir(VOLUME_PART);
    const snapshots = [];
    for (const s of index.snapshots) {
      const dir = await partDir(`${SNAPSHOTS_PART}/${s.name}`);
      snapshots.push({ name: s.name, fill: (target: string) => moveBackupTree(this.ctx.hostTools, dir, target) });
    }
    return { kind: 'fill', fill: (target) => moveBackupTree(this.ctx.hostTools, volumeDir, target), snapshots };
  }

  /** Optimized parts: the pool's driver receives its own streams. */
  private received(index: VolumeBackupIndex, tree: string): ImportSource {
    return { kind: 'receive', format: index.backend, snapshots: index.snapshots.map((s) => s.name), open: openOptimizedPart(tree, VOLUME_OPTIMIZED_LAYOUT) };
  }
}
