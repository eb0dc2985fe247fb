/**
 * Where backups live on the host, as the reference lays them out:
 * `<backups dir>/instances/<volume name>/<backup>`, the backups dir being `<dataDir>/backups` or
 * the volume `storage.backups_volume` names (asked for on every use). Work areas of imports and creations
 * (`.import-<uuid>`, `.create-<uuid>`) sit next to `instances/` on the same filesystem as the
 * backups, so finished trees are moved into place rather than copied.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { daemonStorageDir, type ServiceRegistry } from '../../../sdk/index.js';
import { volumeName } from '../manager.js';

const SCRATCH = /^\.(import|create)-[0-9a-f-]{36}$/;

export class BackupFiles {
  constructor(private readonly ctx: { services: ServiceRegistry; dataDir: string }) {}

  get root(): string {
    return daemonStorageDir(this.ctx, 'backups');
  }

  get instancesRoot(): string {
    return path.join(this.root, 'instances');
  }

  /** Mount point of the staging tmpfs, used only inside the tar process's own mount namespace. */
  get stagingMount(): string {
    return path.join(this.root, '.staging');
  }

  async ensure(): Promise<void> {
    await mkdir(this.root, { recursive: true, mode: 0o700 });
    await mkdir(this.instancesRoot, { recursive: true, mode: 0o700 });
    await mkdir(this.stagingMount, { recursive: true, mode: 0o700 });
  }

  dirOf(project: string, instance: string): string {
    return path.join(this.instancesRoot, volumeName(project, instance));
  }

  file(project: string, instance: string, backup: string): string {
    return path.join(this.dirOf(project, instance), backup);
  }

  /** A file name no backup name can take (backup names are at most 255 bytes, this one starts with a dot and is unique). */
  tempFile(project: string, instance: string): string {
    return path.join(this.dirOf(project, instance), `.partial-${randomUUID()}`);
  }

  async scratch(kind: 'import' | 'create'): Promise<string> {
    await this.ensure();
    const dir = path.join(this.root, `.${kind}-${randomUUID()}`);
    await mkdir(dir, { mode: 0o700 });
    return dir;
  }

  /** Work areas a crash left behind. */
  async removeScratch(): Promise<string[]> {
    const removed: string[] = [];
    for (const entry of await readdir(this.root).catch(() => [] as string[])) {
      if (!SCRATCH.test(entry)) continue;
      await rm(path.join(this.root, entry), { recursive: true, force: true });
      removed.push(entry);
    }
    return removed;
  }
}
