/**
 * Daemon storage (`daemon_storage`): the server keys `storage.images_volume` and
 * `storage.backups_volume` name a custom volume of the default project (`<pool>/<volume>`) that
 * holds the daemon's image files or backup tarballs instead of `<dataDir>/images` or
 * `<dataDir>/backups`. Images and backups ask `dir(kind)` for their base directory on every use.
 *
 * Changing a key moves the files: they are copied into the new place, the base directory switches,
 * and the old copies are removed only once the new value is stored (the config's change listener).
 * A failure part-way removes what was copied and leaves the old place untouched; the kernel's
 * rollback of a later key comes back here with the old value and drops the new copies. A crash
 * before the value is stored leaves the old place whole; one after it leaves duplicates in the data
 * dir, which the next boot removes when the volume holds the same entries.
 *
 * While set, the volume shows `/1.0` in its `used_by`, so it cannot be deleted, renamed or moved,
 * and it takes no snapshots. A volume whose pool is unavailable at start leaves its kind
 * unavailable (a warning; file access fails) and the daemon boots.
 */
import { cp, mkdir, readdir, rm, chmod, access } from 'node:fs/promises';
import path from 'node:path';
import {
  badRequest, DAEMON_STORAGE_KINDS, daemonStorageKey, internalError, KeyedLock,
  type ConfigKeyDescriptor, type DaemonStorageKind, type DaemonStorageService, type PluginContext,
} from '../../../sdk/index.js';
import type { PoolManager } from '../pools.js';
import type { VolumeCatalog } from './catalog.js';
import type { CustomVolumes } from './custom-volumes.js';
import type { VolumeUsers } from './users.js';

/** Daemon storage volumes live in the default project, as the reference keeps them. */
const PROJECT = 'default';
/** What a fresh ext4 filesystem holds; not content. */
const IGNORED = new Set(['lost+found']);
const UNAVAILABLE_WARNING = 'Daemon storage unavailable';
/** How a daemon storage volume shows the daemon in its `used_by`, as the reference does. */
export const DAEMON_USER = '/1.0';

interface Target {
  pool: string;
  volume: string;
}

/** The API address of the volume a key names (for warnings); the raw value when it does not parse. */
function volumeUrlOf(value: string): string {
  const parts = value.split('/');
  return parts.length === 2 ? `/1.0/storage-pools/${encodeURIComponent(parts[0]!)}/volumes/custom/${encodeURIComponent(parts[1]!)}` : value;
}

/** `<pool>/<volume>` or a clear error. */
function parseTarget(value: string): Target {
  const parts = value.split('/');
  if (parts.length !== 2 || !parts[0] || !parts[1]) throw new Error(`"${value}" is not of the form <pool>/<volume>`);
  return { pool: parts[0], volume: parts[1] };
}

interface PendingMove {
  /** The key value the files were moved away from, and where they were. */
  fromValue: string;
  /** Removed there once the new value is stored. */
  from: string;
  to: string;
  entries: string[];
}

export class DaemonStorage implements DaemonStorageService {
  /** Base directory per kind (meaningful only when the kind is available). */
  private readonly current = new Map<DaemonStorageKind, string>();
  /** The key value the base directory corresponds to ('' for the data dir). */
  private readonly configured = new Map<DaemonStorageKind, string>();
  private readonly unavailable = new Map<DaemonStorageKind, string>();
  private readonly pending = new Map<DaemonStorageKind, PendingMove>();
  /** Volumes taken by a move in progress (not yet in `configured`). */
  private readonly claiming = new Map<DaemonStorageKind, string>();
  /** One move at a time, whatever the kind: two kinds must not race for one volume. */
  private readonly lock = new KeyedLock();
  private readonly serial = <T>(fn: () => Promise<T>) => this.lock.run('daemon-storage', fn);

  constructor(
    private readonly ctx: PluginContext,
    private readonly pools: PoolManager,
    private readonly catalog: VolumeCatalog,
    private readonly custom: CustomVolumes,
    private readonly users: VolumeUsers,
  ) {
    for (const kind of DAEMON_STORAGE_KINDS) {
      this.current.set(kind, this.dataDirOf(kind));
      this.configured.set(kind, '');
    }
    ctx.serverConfig.onChange((changed) => {
      for (const kind of DAEMON_STORAGE_KINDS) {
        if (daemonStorageKey(kind) in changed) void this.serial(() => this.dropOldCopies(kind));
      }
    });
  }

  private dataDirOf(kind: DaemonStorageKind): string {
    return path.join(this.ctx.dataDir, kind);
  }

  keys(): ConfigKeyDescriptor[] {
    return DAEMON_STORAGE_KINDS.map((kind) => ({
      key: daemonStorageKey(kind),
      // A volume on this member's own pool.
      member: true,
      scope: 'server',
      type: 'string',
      live: true,
      extension: 'daemon_storage',
      doc: `Custom volume (<pool>/<volume>, default project) holding the daemon's ${kind === 'images' ? 'image files' : 'backup tarballs'} instead of the data directory`,
      validate: (value: string) => this.check(value),
      apply: (value: string) => this.serial(() => this.switchTo(kind, value)),
    }));
  }

  dir(kind: DaemonStorageKind): string {
    const reason = this.unavailable.get(kind);
    if (reason !== undefined) {
      throw internalError(`The storage volume "${this.configured.get(kind)}" holding the daemon's ${kind} is unavailable: ${reason}`);
    }
    return this.current.get(kind)!;
  }

  /** Whether a custom volume holds daemon files (or is being filled with them). */
  holds(project: string, pool: string, name: string): boolean {
    if (project !== PROJECT) return false;
    const value = `${pool}/${name}`;
    return DAEMON_STORAGE_KINDS.some((kind) => this.configured.get(kind) === value || this.claiming.get(kind) === value);
  }

  /** What can be told without touching the host (the key registry's synchronous check). */
  private check(value: string): void {
    const { pool, volume } = parseTarget(value);
    const entry = this.catalog.find(PROJECT, pool, volume);
    if (!entry) throw new Error(`storage volume "${volume}" not found on pool "${pool}" in project "${PROJECT}"`);
    if (entry.doc.contentType !== 'filesystem') throw new Error(`storage volume "${value}" is a block volume; a filesystem volume is needed`);
    if (this.catalog.snapshotsOf(PROJECT, pool, volume).length) throw new Error(`storage volume "${value}" has snapshots; volumes used by the daemon cannot have any`);
  }

  /** Boot, after the pools are mounted and the volume records loaded: find each kind's directory. */
  async boot(): Promise<void> {
    for (const kind of DAEMON_STORAGE_KINDS) {
      const value = this.ctx.serverConfig.get(daemonStorageKey(kind));
      this.configured.set(kind, value);
      if (!value) {
        this.current.set(kind, this.dataDirOf(kind));
        continue;
      }
      try {
        const dir = await this.volumeDir(value);
        await access(dir);
        this.current.set(kind, dir);
        this.unavailable.delete(kind);
        await this.ctx.warnings.resolve(UNAVAILABLE_WARNING, volumeUrlOf(value));
        await this.dropDuplicates(kind, dir);
      } catch (err) {
        const reason = (err as Error).message;
        this.unavailable.set(kind, reason);
        this.ctx.log.error({ kind, volume: value, reason }, 'daemon storage volume unavailable');
        await this.ctx.warnings.raise({
          type: UNAVAILABLE_WARNING,
          message: `The storage volume "${value}" holding the daemon's ${kind} is unavailable: ${reason}`,
          severity: 'high',
          entityUrl: volumeUrlOf(value),
        });
      }
    }
  }

  /** The host directory of a daemon storage volume, once the pool is usable. */
  private async volumeDir(value: string): Promise<string> {
    const { pool, volume } = parseTarget(value);
    await this.pools.usable(pool);
    this.custom.get(PROJECT, pool, volume);
    return this.custom.path(pool, PROJECT, volume);
  }

  /** Everything a volume must be before it takes daemon files (beyond `check`). */
  private async vetVolume(kind: DaemonStorageKind, value: string): Promise<string> {
    this.check(value);
    const { pool, volume } = parseTarget(value);
    for (const other of DAEMON_STORAGE_KINDS) {
      if (other !== kind && (this.configured.get(other) === value || this.claiming.get(other) === value)) {
        throw badRequest(`Storage volume "${value}" already holds the daemon's ${other}`);
      }
    }
    const users = (await this.users.usersOf(PROJECT, pool, volume)).filter((u) => u !== DAEMON_USER);
    if (users.length) throw badRequest(`Storage volume "${value}" is in use by ${users.join(', ')}`);
    const dir = await this.volumeDir(value);
    const present = (await readdir(dir)).filter((e) => !IGNORED.has(e));
    if (present.length) throw badRequest(`Storage volume "${value}" is not empty`);
    return dir;
  }

  /** Put `value` into effect for `kind`, moving the files there. */
  private async switchTo(kind: DaemonStorageKind, value: string): Promise<void> {
    if (value === this.configured.get(kind)) return;
    const pending = this.pending.get(kind);
    // The kernel rolling back (a later key failed): the old place is still whole, drop the copies.
    if (pending && value === pending.fromValue) {
      await removeEntries(pending.to, pending.entries);
      this.pending.delete(kind);
      this.current.set(kind, pending.from);
      this.configured.set(kind, value);
      return;
    }
    if (this.unavailable.has(kind)) {
      throw badRequest(`the daemon's ${kind} cannot be moved out of "${this.configured.get(kind)}": ${this.unavailable.get(kind)}`);
    }
    const to = value ? await this.vetVolume(kind, value) : this.dataDirOf(kind);
    if (value) this.claiming.set(kind, value);
    try {
      await mkdir(to, { recursive: true, mode: 0o700 });
      await chmod(to, 0o700);
      const from = this.current.get(kind)!;
      if (path.resolve(from) === path.resolve(to)) {
        this.configured.set(kind, value);
        return;
      }
      const entries = (await readdir(from).catch(() => [] as string[])).filter((e) => !IGNORED.has(e));
      const copied: string[] = [];
      try {
        for (const entry of entries) {
          copied.push(entry);
          await cp(path.join(from, entry), path.join(to, entry), { recursive: true, force: true, preserveTimestamps: true, verbatimSymlinks: true });
        }
      } catch (err) {
        await removeEntries(to, copied);
        throw new Error(`copying the daemon's ${kind} to ${value || 'the data directory'} failed: ${(err as Error).message}`);
      }
      this.pending.set(kind, { fromValue: this.configured.get(kind) ?? '', from, to, entries });
      this.current.set(kind, to);
      this.configured.set(kind, value);
      this.ctx.log.info({ kind, from, to, entries: entries.length }, 'daemon storage moved');
    } finally {
      this.claiming.delete(kind);
    }
  }

  /** After the new value is stored: the old place's copies go. */
  private async dropOldCopies(kind: DaemonStorageKind): Promise<void> {
    const pending = this.pending.get(kind);
    if (!pending) return;
    this.pending.delete(kind);
    await removeEntries(pending.from, pending.entries).catch((err) =>
      this.ctx.log.warn({ err, kind, dir: pending.from }, 'removing the old copies of daemon files failed'));
  }

  /** Boot: entries left in the data dir by a crash after a move was stored, when the volume has them too. */
  private async dropDuplicates(kind: DaemonStorageKind, volumeDir: string): Promise<void> {
    const old = this.dataDirOf(kind);
    const inVolume = new Set(await readdir(volumeDir).catch(() => [] as string[]));
    const leftovers = (await readdir(old).catch(() => [] as string[])).filter((e) => inVolume.has(e));
    if (!leftovers.length) return;
    this.ctx.log.warn({ kind, leftovers }, 'removing daemon files left in the data directory by an interrupted move');
    await removeEntries(old, leftovers);
  }
}

async function removeEntries(dir: string, entries: string[]): Promise<void> {
  for (const entry of entries) await rm(path.join(dir, entry), { recursive: true, force: true });
}
