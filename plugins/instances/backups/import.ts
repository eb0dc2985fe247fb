/**
 * POST /1.0/instances with a backup tarball as the body (`lxc import`). In the request: the upload
 * is stored in a work area, walked and checked (archive-check.ts), its index read, the target
 * name (`X-LXD-name`) and pool (`X-LXD-pool`) resolved and everything the instance manager can
 * check checked, so that a bad backup is a 400 (409 for a taken name) and leaves nothing. The
 * operation then extracts, shifts ids back if the tree was shifted, and creates the instance
 * with the extracted trees moved into its new volume and snapshots. The instance record is
 * written last (by the manager): after a crash the instance is either whole or absent, and the
 * work area and any volume without a record are removed at boot.
 */
import { mkdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import {
  async, badRequest, isApiError, notFound, type VolumeSource, type ApiRequest, type ApiResponse,
  type DeviceConfig, type Operation, type OperationControl, type PluginContext,
} from '../../../sdk/index.js';
import {
  backupProgressText as progressText, backupUploadAlgorithm, extractBackup, moveBackupEntry, moveBackupTree,
  checkOptimizedTarget, openOptimizedPart, receiveBackupUpload, type BackupAlgorithm as Algorithm,
} from '../../../sdk/lib/backup/index.js';
import { isRootDisk, withRootOn } from '../devices/disk.js';
import type { CreateSpec, InstanceManager } from '../manager.js';
import { checkInstanceName } from '../names.js';
import { NEVER } from '../record.js';
import { operationResources } from '../routes/paths.js';
import { NO_EXPIRY, type SnapshotRecord } from '../snapshots/record.js';
import { scanArchive } from './archive-check.js';
import { BackupFiles } from './files.js';
import { INSTANCE_OPTIMIZED_LAYOUT } from './manager.js';
import { readIndex, type BackupIndex, type InstanceSection } from './index-file.js';
import { backupLayout } from './layout.js';
import { parseShift, unshiftTree } from '../../../sdk/lib/storage/index.js';

function header(value: string | string[] | undefined): string {
  return (Array.isArray(value) ? value[0] : value)?.trim() ?? '';
}

interface ImportPlan {
  spec: CreateSpec;
  pool: string;
  index: BackupIndex;
  algorithm: Algorithm;
}

export class BackupImporter {
  private readonly files: BackupFiles;

  constructor(private readonly ctx: PluginContext, private readonly manager: InstanceManager) {
    this.files = new BackupFiles(ctx);
  }

  async post(req: ApiRequest): Promise<ApiResponse> {
    if (!req.rawBody) throw badRequest('The request has no body');
    const work = await this.files.scratch('import');
    let handedOver = false;
    try {
      const upload = path.join(work, 'upload');
      await receiveBackupUpload(req.rawBody, upload);
      const plan = await this.plan(req, upload);
      const op = await this.start(req, plan, upload, work);
      handedOver = true;
      return async(op);
    } finally {
      if (!handedOver) await rm(work, { recursive: true, force: true });
    }
  }

  /** Everything that can be refused before extraction. */
  private async plan(req: ApiRequest, upload: string): Promise<ImportPlan> {
    const algorithm = await backupUploadAlgorithm(this.ctx.hostTools, upload);
    const scan = await scanArchive(this.ctx.hostTools, upload, algorithm);
    const index = readIndex(scan);

    const project = req.project;
    const name = checkInstanceName(header(req.headers['x-lxd-name']) || index.name);
    const pool = await this.targetPool(project, header(req.headers['x-lxd-pool']), index.pool);
    if (index.optimized) checkOptimizedTarget(index.backend, pool, await this.manager.deps.storage.optimizedFormat(pool));
    const c = index.container;
    const profiles = c.profiles;
    const loaded = await this.manager.loadProfiles(project, profiles);
    const profileRoot = Object.values(Object.assign({}, ...loaded.map((p) => p.devices)) as Record<string, DeviceConfig>).find(isRootDisk);
    const profileRootPool = profileRoot?.pool;

    // The id map in use where the backup was made means nothing here; the driver computes this instance's at creation.
    const config = Object.fromEntries(Object.entries(c.config).filter(([k]) => k !== 'volatile.idmap.current'));
    const spec: CreateSpec = {
      project,
      name,
      type: index.type,
      architecture: c.architecture,
      config,
      devices: withRootOn(c.devices, pool, profileRootPool),
      profiles,
      ephemeral: c.ephemeral,
      description: c.description,
      source: { kind: 'empty' },
      origin: 'import',
      extraConfig: {},
      snapshots: index.snapshots.map((s) => this.snapshotRecord(s, pool, profileRootPool)),
      volumeState: index.volume,
    };
    const checked = await this.manager.check(project, index.type, spec, { action: 'import', name: spec.name });
    if (checked.pool !== pool) throw badRequest(`The instance's root disk would not be on storage pool "${pool}"`);
    return { spec, pool, index, algorithm };
  }

  /** `X-LXD-pool` must exist; else the archive's pool when this daemon has it, else the default profile's. */
  private async targetPool(project: string, requested: string, archived: string): Promise<string> {
    const storage = this.manager.deps.storage;
    if (requested) {
      await storage.pool(requested).catch((err) => {
        throw isApiError(err) && err.status === 404 ? notFound(`Storage pool "${requested}" not found`) : err;
      });
      return requested;
    }
    if (archived && (await storage.poolNames()).includes(archived)) return archived;
    const [defaults] = await this.manager.loadProfiles(project, ['default']).catch(() => []);
    const root = Object.values(defaults?.devices ?? {}).find(isRootDisk);
    if (!root?.pool) throw badRequest(`Storage pool "${archived}" of the backup does not exist here and the default profile has no root disk; choose a pool (X-LXD-pool)`);
    return root.pool;
  }

  private snapshotRecord(s: InstanceSection, pool: string, profileRootPool: string | undefined): SnapshotRecord {
    return {
      name: s.name,
      architecture: s.architecture,
      config: s.config,
      devices: withRootOn(s.devices, pool, profileRootPool),
      ephemeral: s.ephemeral,
      profiles: s.profiles,
      stateful: false,
      description: s.description,
      created_at: s.created_at ?? new Date().toISOString(),
      expires_at: s.expires_at ?? NO_EXPIRY,
      last_used_at: s.last_used_at ?? NEVER,
    };
  }

  private async start(req: ApiRequest, plan: ImportPlan, upload: string, work: string): Promise<Operation> {
    const { spec } = plan;
    const release = await this.manager.reserve(spec.project, spec.name);
    try {
      return this.ctx.operations.create({
        class: 'task',
        description: 'Restoring backup',
        project: req.project,
        requestor: req.requestor,
        resources: operationResources(spec.name),
        run: async (op) => {
          try {
            await this.restore(plan, upload, work, op, req);
          } finally {
            release();
            await rm(work, { recursive: true, force: true });
          }
        },
      });
    } catch (err) {
      release();
      throw err;
    }
  }

  private async restore(plan: ImportPlan, upload: string, work: string, op: OperationControl, req: ApiRequest): Promise<void> {
    const tree = path.join(work, 'tree');
    await mkdir(tree, { mode: 0o700 });
    await this.extract(upload, plan.algorithm, tree, op);
    const root = path.join(tree, 'backup');
    const spec: CreateSpec = { ...plan.spec, source: plan.index.optimized ? this.received(plan.index, tree) : await this.extracted(plan.index, root) };
    await this.manager.create(spec, plan.pool, req);
    const createdAt = plan.index.container.created_at;
    // The manager stamps the time of creation; a restored instance keeps the time it was made.
    if (createdAt) await this.manager.touch(spec.project, spec.name, (r) => { r.created_at = createdAt; });
  }

  /** Plain parts: shifted back where the archive's tree was shifted, then moved into the new volume and snapshots. */
  private async extracted(index: BackupIndex, root: string): Promise<VolumeSource> {
    // Members are under backup/, which `root` is.
    const layout = backupLayout(index.type);
    const member = (name: string) => path.join(root, path.relative('backup', name));
    const main = member(layout.main);
    const snapshotDir = (name: string) => member(`${layout.snapshots}/${name}`);
    const parts = [
      { dir: main, section: index.container },
      ...index.snapshots.map((s) => ({ dir: snapshotDir(s.name), section: s })),
    ];
    for (const part of parts) {
      const rootfs = path.join(part.dir, 'rootfs');
      const exists = await stat(rootfs).then((st) => st.isDirectory(), () => false);
      if (exists) await unshiftTree(rootfs, parseShift(part.section.config['volatile.last_state.idmap']));
    }
    // A virtual machine's disk sits beside its part's directory (`<member>.img`) and goes inside the volume.
    const fillFrom = (dir: string) => async (volume: string) => {
      await this.moveInto(dir, volume);
      if (layout.disk) await moveBackupEntry(this.ctx.hostTools, `${dir}.img`, path.join(volume, layout.disk));
    };
    return {
      kind: 'fill',
      fill: fillFrom(main),
      snapshots: index.snapshots.map((s) => ({ name: s.name, fill: fillFrom(snapshotDir(s.name)) })),
    };
  }

  /**
   * Optimized parts: the pool's driver receives its own streams; each part, still writable, loses
   * the backup.yaml the reference keeps in its volumes and is shifted back like a plain one.
   */
  private received(index: BackupIndex, tree: string): VolumeSource {
    const sections = new Map(index.snapshots.map((s) => [s.name as string | undefined, s]));
    sections.set(undefined, index.container);
    return {
      kind: 'receive',
      format: index.backend,
      snapshots: index.snapshots.map((s) => s.name),
      open: openOptimizedPart(tree, INSTANCE_OPTIMIZED_LAYOUT),
      prepare: async (dir, part) => {
        await rm(path.join(dir, 'backup.yaml'), { force: true });
        const rootfs = path.join(dir, 'rootfs');
        const exists = await stat(rootfs).then((st) => st.isDirectory(), () => false);
        if (exists) await unshiftTree(rootfs, parseShift(sections.get(part)?.config['volatile.last_state.idmap']));
      },
    };
  }

  private async extract(upload: string, algorithm: Algorithm, into: string, op: OperationControl): Promise<void> {
    const started = Date.now();
    let reported = 0;
    await extractBackup(this.ctx.hostTools, {
      upload, algorithm, into, signal: op.signal,
      onProgress: (read, total) => {
        if (Date.now() - reported < 1000) return;
        reported = Date.now();
        op.updateMetadata({ create_instance_from_backup_progress: progressText(read, started, total) });
      },
    });
  }

  /** Move a part's content into the new volume (its backup.yaml is written afresh by every backup: no part of the instance). */
  private moveInto(from: string, dir: string): Promise<void> {
    return moveBackupTree(this.ctx.hostTools, from, dir, ['backup.yaml']);
  }
}
