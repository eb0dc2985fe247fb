/**
 * What a btrfs pool stands on, decided by its `source`:
 *   - a loop file (`source` left empty: `<data dir>/disks/<pool>.img` of `size`), formatted here;
 *   - a block device (`/dev/...`), formatted here (mkfs.btrfs refuses one that holds a file system);
 *   - a directory on an existing btrfs file system, used in place.
 * Files and devices are mounted at `<data dir>/storage-pools/<pool>`. A loop device is attached at
 * mount and marked to detach itself when the file system is unmounted (autoclear), so neither an
 * unmount nor a daemon killed while mounted can leave one behind: a restart finds the mount and
 * reuses it.
 */
import { mkdir, open, readFile, readdir, realpath, rm, rmdir, stat, statfs, writeFile } from 'node:fs/promises';
import { LAYOUT } from './layout.js';
import { statSync } from 'node:fs';
import path from 'node:path';
import { badRequest, parseSize, type HostTools, type PoolInfo } from '../../sdk/index.js';

const BTRFS_MAGIC = 0x9123683e;
/** In a directory source: the pool using it (a second pool on the same directory is refused). */
const OWNER_MARKER = '.corral-pool';
const GiB = 1024 ** 3;

export type SourceKind = 'loop' | 'block' | 'directory';

export const loopFilePath = (dataDir: string, pool: string) => path.join(dataDir, 'disks', `${pool}.img`);
export const mountPoint = (dataDir: string, pool: string) => path.join(dataDir, 'storage-pools', pool);

/** The reference's default loop size: a fifth of the data dir's file system, between 5 and 30 GiB. */
export async function defaultLoopSize(dataDir: string): Promise<string> {
  const fs = await statfs(dataDir);
  const fifth = Math.round((fs.blocks * fs.bsize) / 5 / GiB);
  return `${Math.min(30, Math.max(5, fifth))}GiB`;
}

export function sourceKind(dataDir: string, pool: PoolInfo): SourceKind {
  const source = pool.config.source ?? '';
  if (source === loopFilePath(dataDir, pool.name)) return 'loop';
  if (source.startsWith('/dev/')) return 'block';
  const st = (() => {
    try {
      return statSync(source);
    } catch {
      return undefined;
    }
  })();
  if (st?.isFile()) return 'loop';
  if (st?.isBlockDevice()) return 'block';
  return 'directory';
}

/** Where the pool's volumes live: the mount point, or the source directory itself. */
export function poolRoot(dataDir: string, pool: PoolInfo): string {
  return sourceKind(dataDir, pool) === 'directory' ? path.resolve(pool.config.source!) : mountPoint(dataDir, pool.name);
}

/** `/proc/self/mountinfo` fields 5 (mount point) and after the separator (type, source). */
async function mountsAt(target: string): Promise<{ type: string; source: string }[]> {
  const text = await readFile('/proc/self/mountinfo', 'utf8');
  const unescape = (s: string) => s.replace(/\\(\d{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
  const out: { type: string; source: string }[] = [];
  for (const line of text.split('\n')) {
    const fields = line.split(' ');
    if (fields.length < 10 || unescape(fields[4]!) !== target) continue;
    const sep = fields.indexOf('-');
    out.push({ type: fields[sep + 1]!, source: unescape(fields[sep + 2]!) });
  }
  return out;
}

export async function isMounted(target: string): Promise<boolean> {
  return (await mountsAt(target)).some((m) => m.type === 'btrfs');
}

/** Whether anything mounts `device` (a device in use cannot become a pool). */
async function deviceMounted(device: string): Promise<boolean> {
  const real = await realpath(device).catch(() => device);
  const text = await readFile('/proc/self/mountinfo', 'utf8');
  return text.split('\n').some((line) => {
    const fields = line.split(' ');
    const sep = fields.indexOf('-');
    return sep > 0 && (fields[sep + 2] === device || fields[sep + 2] === real);
  });
}

export class PoolSource {
  constructor(private readonly tools: HostTools, private readonly dataDir: string) {}

  /** Loop devices backed by `file` (normally at most one). */
  async loopsOf(file: string): Promise<string[]> {
    const { stdout } = await this.tools.run('losetup', ['-n', '-O', 'NAME', '-j', file], { allowFailure: true });
    return stdout.split('\n').map((l) => l.trim()).filter(Boolean);
  }

  /** Check the source and make the file system; undo what it made before throwing. */
  async prepare(pool: PoolInfo): Promise<SourceKind> {
    const kind = sourceKind(this.dataDir, pool);
    const source = pool.config.source!;
    if (!path.isAbsolute(source)) throw badRequest(`Source path "${source}" must be absolute`);
    if (kind === 'loop') {
      const bytes = parseSize(pool.config.size!);
      if (bytes < 256 * 1024 ** 2) throw badRequest('A btrfs pool needs a size of at least 256MiB');
      await mkdir(path.dirname(source), { recursive: true, mode: 0o711 });
      // wx: a file already there belongs to someone else (or to a pool whose record is gone).
      const handle = await open(source, 'wx', 0o600).catch((err: NodeJS.ErrnoException) => {
        throw err.code === 'EEXIST' ? badRequest(`Source path "${source}" already exists`) : err;
      });
      try {
        await handle.truncate(bytes);
        await handle.close();
        await this.tools.run('mkfs.btrfs', ['-q', '-L', pool.name, '--', source]);
      } catch (err) {
        await handle.close().catch(() => {});
        await rm(source, { force: true });
        throw err;
      }
    } else if (kind === 'block') {
      const st = await stat(source).catch(() => undefined);
      if (!st?.isBlockDevice()) throw badRequest(`Source "${source}" is not a block device`);
      if (await deviceMounted(source)) throw badRequest(`Source "${source}" is in use (mounted)`);
      const res = await this.tools.run('mkfs.btrfs', ['-q', '-L', pool.name, '--', source], { allowFailure: true });
      if (res.exitCode !== 0) throw badRequest(`Cannot format "${source}": ${res.stderr.trim().split('\n').pop()}`);
    } else {
      const resolved = path.resolve(source);
      if (resolved === this.dataDir || resolved.startsWith(this.dataDir + path.sep)) throw badRequest(`Source path "${source}" is inside the daemon's data directory`);
      const st = await stat(resolved).catch(() => undefined);
      if (!st?.isDirectory()) throw badRequest(`Source path "${source}" isn't a directory, a block device or empty (for a loop file)`);
      if ((await statfs(resolved)).type !== BTRFS_MAGIC) throw badRequest(`Source path "${source}" is not on a btrfs file system`);
      // Empty, or the empty layout a creation cut short left; a marker names the pool that owns it.
      for (const entry of await readdir(resolved)) {
        if (entry === OWNER_MARKER) {
          // A creation of this same pool that a crash cut short may have left it.
          if ((await readFile(path.join(resolved, entry), 'utf8')).trim() === pool.name) continue;
          throw badRequest(`Source path "${source}" is used by another storage pool`);
        }
        const inner = await readdir(path.join(resolved, entry)).catch(() => ['(a file)']);
        if (!LAYOUT.some((l) => l.dir === entry) || inner.length) throw badRequest(`Source path "${source}" isn't empty`);
      }
      await writeFile(path.join(resolved, OWNER_MARKER), `${pool.name}\n`, { mode: 0o600 });
    }
    return kind;
  }

  /** Make the pool's root usable; throws (the family marks the pool unavailable) when it cannot be. */
  async mount(pool: PoolInfo): Promise<void> {
    const kind = sourceKind(this.dataDir, pool);
    const source = pool.config.source!;
    if (kind === 'directory') {
      const st = await stat(source).catch(() => undefined);
      if (!st?.isDirectory()) throw new Error(`Source path "${source}" doesn't exist`);
      if ((await statfs(source)).type !== BTRFS_MAGIC) throw new Error(`Source path "${source}" is not on a btrfs file system`);
      return;
    }
    const target = mountPoint(this.dataDir, pool.name);
    await mkdir(target, { recursive: true, mode: 0o711 });
    if (await isMounted(target)) return;
    const options = pool.config['btrfs.mount_options'] || 'user_subvol_rm_allowed';
    if (kind === 'block') {
      await this.tools.run('mount', ['-t', 'btrfs', '-o', options, '--', source, target]);
      return;
    }
    if (!(await stat(source).then((s) => s.isFile(), () => false))) throw new Error(`Loop file "${source}" doesn't exist`);
    // A loop device a killed daemon left attached (with its mount gone) is reused, not doubled.
    let device = (await this.loopsOf(source))[0];
    if (!device) device = (await this.tools.run('losetup', ['--find', '--show', '--', source])).stdout.trim();
    try {
      await this.tools.run('mount', ['-t', 'btrfs', '-o', options, '--', device, target]);
    } finally {
      // Mounted: autoclear (detached at unmount). Not mounted: detached now.
      await this.tools.run('losetup', ['-d', device], { allowFailure: true });
    }
  }

  /** A bigger loop file, and the file system grown into it while mounted. */
  async grow(pool: PoolInfo, size: string): Promise<void> {
    if (sourceKind(this.dataDir, pool) !== 'loop') throw badRequest('"size" applies only to loop-backed btrfs pools');
    if (size === '') throw badRequest('The "size" of a loop-backed pool cannot be unset');
    const file = pool.config.source!;
    const bytes = parseSize(size);
    const current = (await stat(file)).size;
    if (bytes < current) throw badRequest('A btrfs loop pool cannot shrink');
    if (bytes === current) return;
    const device = (await this.loopsOf(file))[0];
    if (!device) throw badRequest(`Storage pool "${pool.name}" is not mounted`);
    const handle = await open(file, 'r+');
    try {
      await handle.truncate(bytes);
    } finally {
      await handle.close();
    }
    await this.tools.run('losetup', ['-c', device]);
    await this.tools.run('btrfs', ['filesystem', 'resize', 'max', mountPoint(this.dataDir, pool.name)]);
  }

  /** New mount options on the mounted file system (a directory source is not ours to remount). */
  async remount(pool: PoolInfo): Promise<void> {
    if (sourceKind(this.dataDir, pool) === 'directory') throw badRequest('"btrfs.mount_options" does not apply to a pool on an existing btrfs directory');
    const options = pool.config['btrfs.mount_options'] || 'user_subvol_rm_allowed';
    const res = await this.tools.run('mount', ['-o', `remount,${options}`, mountPoint(this.dataDir, pool.name)], { allowFailure: true });
    if (res.exitCode !== 0) throw badRequest(`Invalid btrfs.mount_options "${options}": ${res.stderr.trim().split('\n').pop()}`);
  }

  async unmount(pool: PoolInfo): Promise<void> {
    if (sourceKind(this.dataDir, pool) === 'directory') return;
    const target = mountPoint(this.dataDir, pool.name);
    while (await isMounted(target)) await this.tools.run('umount', ['--', target]);
    if (sourceKind(this.dataDir, pool) === 'loop') {
      for (const device of await this.loopsOf(pool.config.source!)) await this.tools.run('losetup', ['-d', device], { allowFailure: true });
    }
  }

  /** After `unmount`: remove what `prepare` made (the loop file and the mount point). */
  async remove(pool: PoolInfo): Promise<void> {
    const kind = sourceKind(this.dataDir, pool);
    if (kind === 'directory') {
      await rm(path.join(pool.config.source!, OWNER_MARKER), { force: true });
      return;
    }
    await rmdir(mountPoint(this.dataDir, pool.name)).catch(() => {});
    if (kind === 'loop') await rm(pool.config.source!, { force: true });
  }
}
