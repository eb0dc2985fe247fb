/**
 * File operations confined to a container root, with "in root" path resolution (what openat2's
 * RESOLVE_IN_ROOT gives, which Node lacks): `..` at the root stays at the root, absolute symlink
 * targets start again from the root, at most 40 link hops.
 *
 * The tree may have directories mounted into it (the instance's disk devices): a walk that reaches
 * a mount's container path goes on in the mounted directory, as the container sees it, and is
 * confined to it there (`..` at its top climbs back to the container's parent directory).
 *
 * Resolution walks one component at a time holding directory descriptors, opened with
 * O_NOFOLLOW through `/proc/self/fd/<dir>/<name>`, so the kernel never follows a link the
 * container controls; links are read and substituted here. Final operations go through the
 * pinned parent (`/proc/self/fd/<parent>/<name>`), so a directory swapped for a symlink during
 * the request cannot redirect them.
 */
import { constants as C } from 'node:fs';
import { lstat, mkdir, open, readdir, readlink, realpath, rename, rmdir, symlink, unlink, lchown, type FileHandle } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import path from 'node:path';
import { randomHex } from '../../../sdk/index.js';

/** O_PATH is not in fs.constants; Node passes open flags through to open(2). */
const O_PATH = process.arch === 'x64' || process.arch === 'arm64' || process.arch === 'arm' || process.arch === 'ia32'
  || process.arch === 'riscv64' || process.arch === 's390x' || process.arch === 'ppc64' || process.arch === 'loong64'
  ? 0o10000000 : undefined;
const MAX_HOPS = 40;
/** Times an entry may change kind under a walk before it gives up. */
const MAX_RETRIES = 5;
const DIR_FLAGS = C.O_RDONLY | C.O_DIRECTORY | C.O_NOFOLLOW;

export interface WriteOptions {
  uid?: number;
  gid?: number;
  mode?: number;
  append?: boolean;
  /** An existing file keeps its owner and mode even when uid, gid or mode are given. */
  keepExisting?: boolean;
}

/** Maps ids between the container and what is stored on disk (a host directory mounted without shifting). */
export interface IdTranslation {
  /** Container id to the id stored on disk; undefined when the container cannot own it. */
  toDisk(id: number, kind: 'uid' | 'gid'): number | undefined;
  /** Id stored on disk to the id the container sees. */
  toContainer(id: number, kind: 'uid' | 'gid'): number;
}

/** A host directory (or a single file) mounted into the container's tree. */
export interface TreeMount {
  /** Container path it is mounted at (absolute, normalised, no trailing slash). */
  target: string;
  /** Host directory, or host file with `file`. */
  source: string;
  /** A single file is mounted: it is written in place and cannot be removed or replaced. */
  file?: boolean;
  readonly: boolean;
  /** Unset: ids on disk are the container's own (as in the root filesystem). */
  ids?: IdTranslation;
}

/** A container root with what is mounted into it. A bare string is a root with no mounts. */
export interface ContainerTree {
  root: string;
  mounts: readonly TreeMount[];
}

export type TreeSpec = string | ContainerTree;
export interface OwnerOptions { uid?: number; gid?: number; mode?: number }
export interface MkdirOptions extends OwnerOptions {
  /** Create missing parent directories too (0755, owned by the container's root). */
  parents?: boolean;
}

export type EntryKind = 'file' | 'directory' | 'symlink' | 'other';

export interface EntryInfo {
  kind: EntryKind;
  uid: number;
  gid: number;
  /** Permission bits (mode & 0o7777). */
  mode: number;
  mtime: Date;
  size: number;
}

export type ReadResult =
  | (EntryInfo & { kind: 'file'; stream: NodeJS.ReadableStream })
  | (EntryInfo & { kind: 'directory'; entries: string[] })
  | (EntryInfo & { kind: 'symlink'; target: string });

/** An errno-style failure that names the container path, never the host path. */
export class RootFsError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
    this.name = 'RootFsError';
  }
}

const fdPath = (fh: FileHandle, name?: string) => (name === undefined ? `/proc/self/fd/${fh.fd}` : `/proc/self/fd/${fh.fd}/${name}`);

function kindOf(st: Stats): EntryKind {
  if (st.isFile()) return 'file';
  if (st.isDirectory()) return 'directory';
  if (st.isSymbolicLink()) return 'symlink';
  return 'other';
}

const infoOf = (st: Stats): EntryInfo => ({ kind: kindOf(st), uid: st.uid, gid: st.gid, mode: st.mode & 0o7777, mtime: st.mtime, size: st.size });

const errnoOf = (err: unknown): string | undefined => (err as NodeJS.ErrnoException)?.code;

const MESSAGES: Record<string, string> = {
  ENOENT: 'No such file or directory',
  ENOTDIR: 'Not a directory',
  ELOOP: 'Too many levels of symbolic links',
  EISDIR: 'Is a directory',
  EEXIST: 'File exists',
  ENOTEMPTY: 'Directory not empty',
  ENAMETOOLONG: 'File name too long',
  EBUSY: 'Device or resource busy',
  EINVAL: 'Invalid argument',
  EPERM: 'Operation not permitted',
  EACCES: 'Permission denied',
  EROFS: 'Read-only file system',
  ENOSPC: 'No space left on device',
  EDQUOT: 'Disk quota exceeded',
};

function fail(code: string, target: string, detail?: string): RootFsError {
  return new RootFsError(code, `${detail ?? MESSAGES[code] ?? code}: ${target}`);
}

/** Turn a host-side errno failure into one that names the container path; others pass through. */
function translate(err: unknown, target: string): unknown {
  if (err instanceof RootFsError) return err;
  const code = errnoOf(err);
  return code && code in MESSAGES ? fail(code, target) : err;
}

function split(p: string): string[] {
  return p.split('/').filter((c) => c !== '' && c !== '.');
}

/** A resolved location: a pinned directory and a name in it (null: the directory itself). */
interface Location {
  dir: FileHandle;
  name: string | null;
}

/** The filesystem a pinned directory belongs to: the root's, or a mount's. */
interface Domain {
  /** Host real path of its top directory: everything pinned in it must stay under it. */
  real: string;
  readonly: boolean;
  ids?: IdTranslation;
  /** The top directory of a mount (it cannot be removed). */
  top?: FileHandle;
  /** For the host directory holding a file mount: the file's name there (the only name the walk may touch). */
  file?: string;
}

/** A directory on the walk's stack and its path as the container sees it. */
interface Frame {
  fh: FileHandle;
  path: string;
}

const childPath = (dir: string, name: string) => (dir === '/' ? `/${name}` : `${dir}/${name}`);

/** One resolution against a root; owns every descriptor it opens until `close()`. */
class Walk {
  private readonly open = new Set<FileHandle>();
  private readonly domains = new Map<FileHandle, Domain>();
  private readonly mounts: ReadonlyMap<string, TreeMount>;
  private readonly rootDomain: Domain;
  private hops = 0;
  private retries = 0;

  private constructor(rootReal: string, readonly root: FileHandle, readonly target: string, mounts: readonly TreeMount[]) {
    this.open.add(root);
    this.rootDomain = { real: rootReal, readonly: false };
    // A later mount at the same path hides an earlier one, as it would in the container.
    this.mounts = new Map(mounts.map((m) => [m.target, m]));
  }

  static async start(tree: TreeSpec, target: string): Promise<Walk> {
    if (target.includes('\0')) throw fail('EINVAL', JSON.stringify(target), 'Invalid path');
    const { root, mounts } = typeof tree === 'string' ? { root: tree, mounts: [] } : tree;
    const rootReal = await realpath(root).catch((err) => { throw errnoOf(err) === 'ENOENT' ? fail('ENOENT', '/', 'The instance root filesystem is missing') : err; });
    const fh = await open(rootReal, C.O_RDONLY | C.O_DIRECTORY);
    return new Walk(rootReal, fh, target, mounts);
  }

  /** The filesystem `dir` (a directory pinned by this walk) belongs to. */
  domainOf(dir: FileHandle): Domain {
    return this.domains.get(dir) ?? this.rootDomain;
  }

  /** Names of the mount points directly in the directory at container path `dir`. */
  mountPointsIn(dir: string): string[] {
    return [...this.mounts.keys()].filter((t) => t !== '/' && path.posix.dirname(t) === dir).map((t) => path.posix.basename(t));
  }

  /** Refuse changes in a read-only mount, as the container's kernel would. */
  writable(dir: FileHandle): void {
    if (this.domainOf(dir).readonly) throw fail('EROFS', this.target);
  }

  /** Ids as stored on disk in `dir`'s filesystem, for ids the container gave. */
  diskIds(dir: FileHandle, uid: number, gid: number): { uid: number; gid: number } {
    const ids = this.domainOf(dir).ids;
    if (!ids) return { uid, gid };
    const u = ids.toDisk(uid, 'uid');
    const g = ids.toDisk(gid, 'gid');
    if (u === undefined || g === undefined) throw fail('EINVAL', this.target, `Owner ${uid}:${gid} is not mapped in the instance for`);
    return { uid: u, gid: g };
  }

  /** An entry's description with ids as the container sees them. */
  info(dir: FileHandle, st: Stats): EntryInfo {
    const info = infoOf(st);
    const ids = this.domainOf(dir).ids;
    return ids ? { ...info, uid: ids.toContainer(info.uid, 'uid'), gid: ids.toContainer(info.gid, 'gid') } : info;
  }

  /** Pin the top directory of a mount (its source is the host's, so it is followed as the mount followed it). */
  private async openMount(mount: TreeMount): Promise<FileHandle> {
    const real = await this.realSource(mount);
    const fh = await this.track(open(real, C.O_RDONLY | C.O_DIRECTORY));
    this.domains.set(fh, { real, readonly: mount.readonly, ids: mount.ids, top: fh });
    return fh;
  }

  /** A file mount: the host directory that holds the file, and the file's name in it. */
  private async openFileMount(mount: TreeMount): Promise<Location> {
    const real = await this.realSource(mount);
    const dir = path.dirname(real);
    const name = path.basename(real);
    const fh = await this.track(open(dir, C.O_RDONLY | C.O_DIRECTORY));
    this.domains.set(fh, { real: dir, readonly: mount.readonly, ids: mount.ids, file: name });
    return { dir: fh, name };
  }

  private async realSource(mount: TreeMount): Promise<string> {
    return realpath(mount.source).catch((err) => {
      throw errnoOf(err) === 'ENOENT' ? fail('ENOENT', this.target, `The source of the disk mounted at ${mount.target} is missing for`) : err;
    });
  }

  async close(): Promise<void> {
    await Promise.all([...this.open].map((fh) => fh.close().catch(() => undefined)));
    this.open.clear();
  }

  async track<T extends FileHandle>(p: Promise<T>): Promise<T> {
    const fh = await p;
    this.open.add(fh);
    return fh;
  }

  async release(fh: FileHandle): Promise<void> {
    if (fh === this.root || !this.open.delete(fh)) return;
    this.domains.delete(fh);
    await fh.close().catch(() => undefined);
  }

  /** Pin a directory reached from `parent`: it belongs to the same filesystem. */
  private inherit(parent: FileHandle, fh: FileHandle): FileHandle {
    const domain = this.domains.get(parent);
    if (domain) this.domains.set(fh, { ...domain, top: undefined });
    return fh;
  }

  /**
   * Resolve `target`. Intermediate links are always followed in the root; the final one only
   * with `followFinal`. `viaLink` tells whether the final name came from a link target.
   */
  async resolve(followFinal: boolean, createParents = false): Promise<Location & { viaLink: boolean; path: string }> {
    const stack: Frame[] = [{ fh: this.root, path: '/' }];
    const todo = split(this.target);
    let viaLink = false;
    const top = () => stack[stack.length - 1]!.fh;
    while (todo.length > 0) {
      const name = todo.shift()!;
      if (name === '..') {
        if (stack.length > 1) await this.release(stack.pop()!.fh);
        continue;
      }
      // A mount hides whatever is at its path underneath, link or not.
      const here = childPath(stack[stack.length - 1]!.path, name);
      const mount = this.mounts.get(here);
      if (mount?.file) {
        // Nothing can be below a file, not even `..` (the kernel answers the same).
        if (todo.length > 0) throw fail('ENOTDIR', this.target);
        return { ...(await this.openFileMount(mount)), viaLink, path: here };
      }
      if (mount) {
        stack.push({ fh: await this.openMount(mount), path: here });
        continue;
      }
      // Final unless a `..` still has to climb back through it.
      const last = todo.length === 0;
      if (last) {
        const st = await lstat(fdPath(top(), name)).catch((err) => {
          if (errnoOf(err) === 'ENOENT') return undefined;
          throw err;
        });
        if (!st?.isSymbolicLink() || !followFinal) {
          await this.checkInside(top());
          return { dir: top(), name, viaLink, path: here };
        }
      } else {
        const fh = await this.tryOpenDir(top(), name, createParents);
        if (fh) {
          stack.push({ fh, path: here });
          continue;
        }
      }
      const link = await this.readLinkIfStill(top(), name);
      if (link === undefined) {
        // Not a link (any more): a file in the middle of the path, or swapped under us; look again.
        if (++this.retries > MAX_RETRIES) throw fail('ENOTDIR', this.target);
        todo.unshift(name);
        continue;
      }
      if (++this.hops > MAX_HOPS) throw fail('ELOOP', this.target);
      if (last) viaLink = true;
      if (link.startsWith('/')) {
        while (stack.length > 1) await this.release(stack.pop()!.fh);
      }
      todo.unshift(...split(link));
    }
    await this.checkInside(top());
    return { dir: top(), name: null, viaLink: false, path: stack[stack.length - 1]!.path };
  }

  /**
   * Open a child directory without following a link; undefined when the child is a link.
   * With `create`, a missing child is made (0755, owned by the container's root).
   */
  private async tryOpenDir(dir: FileHandle, name: string, create: boolean): Promise<FileHandle | undefined> {
    try {
      return this.inherit(dir, await this.track(open(fdPath(dir, name), DIR_FLAGS)));
    } catch (err) {
      const code = errnoOf(err);
      if (code === 'ELOOP' || code === 'ENOTDIR') return undefined;
      if (code !== 'ENOENT' || !create) throw err;
    }
    this.writable(dir);
    await mkdir(fdPath(dir, name), 0o755).catch((err) => { if (errnoOf(err) !== 'EEXIST') throw err; });
    const made = await this.tryOpenDir(dir, name, false);
    // Owned by the container's root, which is not root on disk in a host directory that is not shifted.
    const ids = this.domainOf(dir).ids;
    if (made && ids) {
      const owner = this.diskIds(dir, 0, 0);
      await made.chown(owner.uid, owner.gid);
    }
    return made;
  }

  private async readLinkIfStill(dir: FileHandle, name: string): Promise<string | undefined> {
    try {
      return await readlink(fdPath(dir, name));
    } catch (err) {
      if (errnoOf(err) === 'EINVAL') return undefined;
      throw err;
    }
  }

  /** Belt and braces: the pinned directory must still be inside the root (or its mount's source) on the host. */
  async checkInside(dir: FileHandle): Promise<void> {
    if (dir === this.root) return;
    const { real } = this.domainOf(dir);
    const where = await readlink(fdPath(dir));
    const prefix = real.endsWith('/') ? real : `${real}/`;
    if (where !== real && !where.startsWith(prefix)) {
      throw fail('ENOENT', this.target, 'The path left the instance root filesystem');
    }
  }
}

async function withWalk<T>(root: TreeSpec, target: string, fn: (walk: Walk) => Promise<T>): Promise<T> {
  const walk = await Walk.start(root, target);
  try {
    return await fn(walk);
  } catch (err) {
    throw translate(err, target);
  } finally {
    await walk.close();
  }
}

/** Pin whatever is at `loc` (never following a link) and stat it; undefined when missing. */
async function pin(walk: Walk, loc: Location): Promise<{ fh: FileHandle; st: Stats } | undefined> {
  if (loc.name === null) return { fh: loc.dir, st: await loc.dir.stat() };
  if (O_PATH === undefined) throw new Error('O_PATH is not known on this architecture');
  let fh: FileHandle;
  try {
    fh = await walk.track(open(fdPath(loc.dir, loc.name), O_PATH | C.O_NOFOLLOW));
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return undefined;
    throw err;
  }
  return { fh, st: await fh.stat() };
}

/** Stat a container path without following a final link. */
export async function statInRoot(root: TreeSpec, target: string): Promise<EntryInfo | undefined> {
  return withWalk(root, target, async (walk) => {
    const loc = await walk.resolve(false);
    const found = await pin(walk, loc);
    return found && walk.info(loc.dir, found.st);
  });
}

/**
 * Read a container path: a file as a stream, a directory as its entry names, a final symlink
 * as its target (not followed, as the reference does).
 */
export async function readInRoot(root: TreeSpec, target: string): Promise<ReadResult> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await readOnce(root, target);
    } catch (err) {
      // The final link was swapped for something else between pinning and reading it.
      if (!(err instanceof Changed) || attempt >= MAX_RETRIES) throw err instanceof Changed ? fail('ENOENT', target) : err;
    }
  }
}

class Changed extends Error {}

async function readOnce(root: TreeSpec, target: string): Promise<ReadResult> {
  return withWalk(root, target, async (walk) => {
    const loc = await walk.resolve(false);
    const found = await pin(walk, loc);
    if (!found) throw fail('ENOENT', target);
    const info = walk.info(loc.dir, found.st);
    switch (info.kind) {
      case 'symlink':
        return {
          ...info,
          kind: 'symlink',
          target: await readlink(fdPath(loc.dir, loc.name!)).catch((err) => { throw errnoOf(err) === 'EINVAL' ? new Changed() : err; }),
        };
      case 'directory': {
        // Through the pinned inode's magic link: the listing cannot come from anywhere else.
        const entries = await readdir(fdPath(found.fh));
        // Mount points the container will have even where the directory underneath lacks them.
        for (const name of walk.mountPointsIn(loc.path)) if (!entries.includes(name)) entries.push(name);
        return { ...info, kind: 'directory', entries };
      }
      case 'file': {
        // Reopening the magic link of the pinned inode (no O_NOFOLLOW: it is a link itself).
        const file = await open(fdPath(found.fh), C.O_RDONLY);
        return { ...info, kind: 'file', stream: file.createReadStream() };
      }
      default:
        // Devices and fifos: opening them can block or have side effects.
        throw fail('EINVAL', target, 'Not a regular file, directory or symlink');
    }
  });
}

async function writeAll(fh: FileHandle, data: Buffer | NodeJS.ReadableStream): Promise<void> {
  const put = async (buf: Buffer) => {
    for (let off = 0; off < buf.length;) off += (await fh.write(buf, off, buf.length - off)).bytesWritten;
  };
  if (Buffer.isBuffer(data)) return put(data);
  for await (const chunk of data as AsyncIterable<Buffer | string>) await put(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
}

/**
 * Write `data` to `target` (a container path) inside `root`, never touching anything outside it.
 * A final symlink is followed inside the root (as the reference does). Overwrites go to a temp
 * file in the same directory renamed into place, so a failure leaves the old file whole.
 * Without explicit uid/gid/mode (or with `keepExisting`) an existing file keeps its own; new
 * files get 0:0 and 0644 unless told otherwise. Ids are written as given (the rootfs holds container ids on disk), or mapped for a host
 * directory mounted without shifting.
 */
export async function writeFileInRoot(
  root: TreeSpec, target: string, data: Buffer | NodeJS.ReadableStream, opts: WriteOptions = {},
): Promise<void> {
  return withWalk(root, target, async (walk) => {
    const loc = await walk.resolve(true);
    if (loc.name === null) throw fail('EISDIR', target);
    const existing = await pin(walk, loc);
    if (existing && existing.st.isDirectory()) throw fail('EISDIR', target);
    walk.writable(loc.dir);
    const fileMount = walk.domainOf(loc.dir).file !== undefined;
    const keep = existing?.st.isFile() ? existing.st : undefined;
    const given = walk.diskIds(loc.dir, opts.uid ?? 0, opts.gid ?? 0);
    const kept = opts.keepExisting ? keep : undefined;
    const uid = kept?.uid ?? (opts.uid !== undefined ? given.uid : keep?.uid ?? given.uid);
    const gid = kept?.gid ?? (opts.gid !== undefined ? given.gid : keep?.gid ?? given.gid);
    const mode = kept ? kept.mode & 0o7777 : opts.mode ?? (keep ? keep.mode & 0o7777 : 0o644);

    if (opts.append || fileMount) {
      if (!existing) throw fail('ENOENT', target);
      if (!existing.st.isFile()) throw fail('EINVAL', target, 'Not a regular file');
      // Reopen the pinned inode: whatever is at the name now, we append to what we checked.
      // A mounted file is written in place: replacing it would leave the mount on the old inode.
      const fh = await walk.track(open(fdPath(existing.fh), C.O_WRONLY | (opts.append ? C.O_APPEND : C.O_TRUNC)));
      await writeAll(fh, data);
      if (!kept && (opts.uid !== undefined || opts.gid !== undefined)) await fh.chown(uid, gid);
      if (!kept && opts.mode !== undefined) await fh.chmod(mode);
      return;
    }

    const tmp = `.corral-upload-${randomHex(6)}`;
    const fh = await walk.track(open(fdPath(loc.dir, tmp), C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o600));
    try {
      await writeAll(fh, data);
      await fh.chown(uid, gid);
      // After chown, which clears set-id bits.
      await fh.chmod(mode);
      await walk.release(fh);
      await walk.checkInside(loc.dir);
      await rename(fdPath(loc.dir, tmp), fdPath(loc.dir, loc.name));
    } catch (err) {
      await walk.release(fh);
      await unlink(fdPath(loc.dir, tmp)).catch(() => undefined);
      throw err;
    }
  });
}

/**
 * Create a directory. An existing directory (also through a link in the root) is left as it
 * is, as the reference does; a new one gets 0:0 and 0750 unless told otherwise.
 */
export async function mkdirInRoot(root: TreeSpec, target: string, opts: MkdirOptions = {}): Promise<void> {
  return withWalk(root, target, async (walk) => {
    const loc = await walk.resolve(true, opts.parents);
    const existing = await pin(walk, loc);
    if (existing) {
      if (existing.st.isDirectory()) return;
      throw fail('EEXIST', target, 'A file that is not a directory exists at');
    }
    // A dangling link: POSIX mkdir refuses it too. A mounted file is there even if its source just went.
    if (loc.viaLink || walk.domainOf(loc.dir).file !== undefined) throw fail('EEXIST', target);
    walk.writable(loc.dir);
    const owner = walk.diskIds(loc.dir, opts.uid ?? 0, opts.gid ?? 0);
    const where = fdPath(loc.dir, loc.name!);
    await mkdir(where, 0o700);
    const fh = await walk.track(open(where, DIR_FLAGS));
    await fh.chown(owner.uid, owner.gid);
    await fh.chmod(opts.mode ?? 0o750);
  });
}

/** Create a symlink (not followed). Re-creating the same link is a no-op, as in the reference. */
export async function symlinkInRoot(root: TreeSpec, target: string, linkTarget: string, opts: OwnerOptions = {}): Promise<void> {
  if (linkTarget === '' || linkTarget.includes('\0')) throw fail('EINVAL', target, 'Invalid symlink target for');
  return withWalk(root, target, async (walk) => {
    const loc = await walk.resolve(false);
    // Nothing is ever made beside a mounted file, in the host directory that holds it.
    if (loc.name === null || walk.domainOf(loc.dir).file !== undefined) throw fail('EEXIST', target);
    const where = fdPath(loc.dir, loc.name);
    const existing = await pin(walk, loc);
    if (existing) {
      if (existing.st.isSymbolicLink() && (await readlink(where).catch(() => undefined)) === linkTarget) return;
      throw fail('EEXIST', target);
    }
    walk.writable(loc.dir);
    const owner = walk.diskIds(loc.dir, opts.uid ?? 0, opts.gid ?? 0);
    await symlink(linkTarget, where);
    await lchown(where, owner.uid, owner.gid);
  });
}

/** Remove a file, a symlink (not its target) or an empty directory. */
export async function removeInRoot(root: TreeSpec, target: string): Promise<void> {
  return withWalk(root, target, async (walk) => {
    const loc = await walk.resolve(false);
    // A mount point cannot go while it is mounted, as rmdir(2) and unlink(2) answer in the container.
    if (loc.name === null && walk.domainOf(loc.dir).top === loc.dir) throw fail('EBUSY', target);
    if (walk.domainOf(loc.dir).file !== undefined) throw fail('EBUSY', target);
    if (loc.name === null) throw fail('EINVAL', target, 'Cannot remove a directory through "." or "..", or the root');
    const found = await pin(walk, loc);
    if (!found) throw fail('ENOENT', target);
    walk.writable(loc.dir);
    const where = fdPath(loc.dir, loc.name);
    if (found.st.isDirectory()) await rmdir(where);
    else await unlink(where);
  });
}
