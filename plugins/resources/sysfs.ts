/**
 * Reading the host's /proc, /sys, /dev and /run for one request.
 *
 * A `HostReader` lives for exactly one GET: every file, directory listing, link and stat it
 * answers is remembered, so collectors that look at the same file (a PCI device seen by the
 * network, storage, GPU and PCI sections) cost one read. Nothing outlives the request.
 * `root` lets tests point the collectors at a fixture tree instead of `/`.
 */
import { open, readdir, readlink, realpath, stat } from 'node:fs/promises';
import path from 'node:path';

export interface StatInfo {
  size: number;
  mtimeMs: number;
  isDirectory: boolean;
}

export class HostReader {
  readonly root: string;
  private readonly texts = new Map<string, Promise<string | undefined>>();
  private readonly bytes = new Map<string, Promise<Buffer | undefined>>();
  private readonly dirs = new Map<string, Promise<string[]>>();
  private readonly links = new Map<string, Promise<string | undefined>>();
  private readonly reals = new Map<string, Promise<string | undefined>>();
  private readonly stats = new Map<string, Promise<StatInfo | undefined>>();

  constructor(root = '/') {
    this.root = path.resolve(root);
  }

  /** The path on this machine of a host path (differs from it only under a fixture root). */
  local(hostPath: string): string {
    return this.root === '/' ? hostPath : path.join(this.root, hostPath);
  }

  /** A file's contents, undefined when it cannot be read (absent, permission, I/O error). */
  raw(hostPath: string): Promise<string | undefined> {
    return memo(this.texts, hostPath, async () => (await readSmall(this.local(hostPath), hostPath.startsWith('/sys/'))).toString('utf8'));
  }

  /** A file's contents trimmed of surrounding white space. */
  async text(hostPath: string): Promise<string | undefined> {
    return (await this.raw(hostPath))?.trim();
  }

  /** A file read as bytes (binary attributes such as PCI VPD). */
  binary(hostPath: string): Promise<Buffer | undefined> {
    return memo(this.bytes, hostPath, () => readSmall(this.local(hostPath), false));
  }

  /** A decimal integer file (`-1` style values included). */
  async int(hostPath: string): Promise<number | undefined> {
    const value = await this.text(hostPath);
    if (value === undefined || !/^-?\d+$/.test(value)) return undefined;
    return Number(value);
  }

  /** A hexadecimal file such as `0x1af4`, returned as a number. */
  async hex(hostPath: string): Promise<number | undefined> {
    const value = await this.text(hostPath);
    if (value === undefined || !/^(0x)?[0-9a-f]+$/i.test(value)) return undefined;
    return parseInt(value, 16);
  }

  /** Sorted names in a directory; empty when it is absent or unreadable. */
  list(hostPath: string): Promise<string[]> {
    return memo(this.dirs, hostPath, async () => (await readdir(this.local(hostPath))).sort(naturalCompare)).then((v) => v ?? []);
  }

  /** A symbolic link's own text. */
  link(hostPath: string): Promise<string | undefined> {
    return memo(this.links, hostPath, () => readlink(this.local(hostPath)));
  }

  /** The last element of a link's target (`driver` -> `virtio_net`). */
  async linkName(hostPath: string): Promise<string | undefined> {
    const target = await this.link(hostPath);
    return target === undefined ? undefined : path.basename(target);
  }

  /** The host path a path resolves to, all links followed. */
  resolve(hostPath: string): Promise<string | undefined> {
    return memo(this.reals, hostPath, async () => {
      const real = await realpath(this.local(hostPath));
      return this.root === '/' ? real : '/' + path.relative(this.root, real);
    });
  }

  stat(hostPath: string): Promise<StatInfo | undefined> {
    return memo(this.stats, hostPath, async () => {
      const s = await stat(this.local(hostPath));
      return { size: s.size, mtimeMs: s.mtimeMs, isDirectory: s.isDirectory() };
    });
  }

  async exists(hostPath: string): Promise<boolean> {
    return (await this.stat(hostPath)) !== undefined;
  }
}

/**
 * Reads a whole file with as few thread-pool round trips as possible (open, read, close): a sysfs
 * attribute comes whole in one read, so a short read there is the end; /proc files are
 * generated a page at a time, so they are read until a read returns nothing.
 */
async function readSmall(file: string, sysfs: boolean): Promise<Buffer> {
  const handle = await open(file, 'r');
  try {
    const chunks: Buffer[] = [];
    let position = 0;
    for (;;) {
      const buffer = Buffer.allocUnsafe(position === 0 ? 4096 : 65536);
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, position);
      if (bytesRead > 0) chunks.push(buffer.subarray(0, bytesRead));
      position += bytesRead;
      if (bytesRead === 0 || (sysfs && bytesRead < buffer.length)) break;
    }
    return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  } finally {
    handle.close().catch(() => undefined);
  }
}

function memo<T>(cache: Map<string, Promise<T | undefined>>, key: string, load: () => Promise<T>): Promise<T | undefined> {
  let hit = cache.get(key);
  if (!hit) {
    hit = load().catch(() => undefined);
    cache.set(key, hit);
  }
  return hit;
}

/** Orders `cpu2` before `cpu10` and `memory9` before `memory10`. */
export function naturalCompare(a: string, b: string): number {
  return a.localeCompare(b, 'en', { numeric: true });
}

/**
 * A kernel list such as `0-3,8,10-11` (cpu and node lists) as numbers; empty input gives [].
 */
export function parseList(list: string | undefined): number[] {
  const out: number[] = [];
  for (const part of (list ?? '').split(',')) {
    const item = part.trim();
    if (!item) continue;
    const m = /^(\d+)(?:-(\d+))?$/.exec(item);
    if (!m) continue;
    const from = Number(m[1]);
    const to = m[2] === undefined ? from : Number(m[2]);
    for (let i = from; i <= to; i++) out.push(i);
  }
  return out;
}

/** A size as the kernel prints it in sysfs (`32K`, `1024K`, `32M`) in bytes. */
export function parseSize(value: string | undefined): number | undefined {
  const m = /^(\d+)\s*([KMGT]?)/i.exec(value?.trim() ?? '');
  if (!m) return undefined;
  const unit = { '': 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3, T: 1024 ** 4 }[m[2]!.toUpperCase() as '' | 'K' | 'M' | 'G' | 'T'];
  return Number(m[1]) * unit;
}

/** Four lower-case hex digits, as PCI and USB identifiers are written (`0x1af4` -> `1af4`). */
export function hexId(value: number | undefined): string {
  return value === undefined ? '' : value.toString(16).padStart(4, '0');
}

/** `KEY=value` lines (uevent files, udev properties) as a map. */
export function parseKeyValues(text: string | undefined): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of (text ?? '').split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) out.set(line.slice(0, eq).trim(), line.slice(eq + 1).trim());
  }
  return out;
}

/** `Key : value` lines of a /proc file split into blocks at empty lines (/proc/cpuinfo). */
export function parseColonBlocks(text: string | undefined): Map<string, string>[] {
  const blocks: Map<string, string>[] = [];
  let current = new Map<string, string>();
  for (const line of (text ?? '').split('\n')) {
    if (!line.trim()) {
      if (current.size) blocks.push(current);
      current = new Map();
      continue;
    }
    const colon = line.indexOf(':');
    if (colon < 0) continue;
    current.set(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
  }
  if (current.size) blocks.push(current);
  return blocks;
}

/** Removes the listed keys whose value is empty (Go's `omitempty`: '', 0, false, [], {}, null). */
export function omitEmpty<T extends object>(value: T, keys: readonly (keyof T)[]): T {
  for (const key of keys) {
    const v = value[key] as unknown;
    const empty = v === undefined || v === null || v === '' || v === 0 || v === false
      || (Array.isArray(v) && v.length === 0)
      || (typeof v === 'object' && v !== null && !Array.isArray(v) && Object.keys(v).length === 0);
    if (empty) delete value[key];
  }
  return value;
}
