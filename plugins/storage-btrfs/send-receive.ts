/**
 * Optimized backups with `btrfs send/receive`, one stream per part as the reference's archives
 * hold them: each snapshot (oldest first; each after the first relative to the one before, so
 * shared extents travel once), then a read-only snapshot of the volume's current content (named
 * `.volume`: snapshot names cannot start with a dot) relative to the last snapshot. The header
 * lists the parts with their subvolume UUIDs, as the reference's `optimized_header.yaml` does.
 *
 * Receiving takes each stream into a scratch directory of the pool, in order (a relative stream
 * finds its parent there by received UUID), and checks that each made exactly one subvolume.
 * Then every part is snapshotted writable under a scratch name beside its final place, prepared
 * by the caller, made read-only when it is a snapshot, and renamed into place. Scratch
 * directories a killed daemon left are removed at the next mount.
 */
import { chmod, mkdir, readdir, rename } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import {
  badRequest, conflict, notFound, randomHex, type HostTools, type OptimizedPart, type PoolInfo, type VolumeRef,
  type VolumeSendReceive,
} from '../../sdk/index.js';
import { VOLUME_MODE } from '../../sdk/lib/storage/index.js';
import { BUILDING, SCRATCH_DIR } from './layout.js';
import type { BtrfsSnapshots } from './snapshots.js';
import { Subvolumes, exists } from './subvolumes.js';

const VOLUME_ENTRY = '.volume';

/** One entry of the header: `path` is `/` for the part's own subvolume (nested ones are not sent). */
export interface SentSubvolume {
  path: string;
  /** The snapshot's name, '' for the volume. */
  snapshot: string;
  readonly: boolean;
  uuid: string;
}

const partName = (part: OptimizedPart) => (part === undefined ? 'the volume' : `snapshot "${part}"`);

export class BtrfsSendReceive implements VolumeSendReceive {
  readonly format = 'btrfs';

  constructor(
    private readonly tools: HostTools,
    private readonly subvolumes: Subvolumes,
    private readonly snapshots: BtrfsSnapshots,
    private readonly root: (pool: PoolInfo) => string,
    private readonly volumePath: (pool: PoolInfo, vol: VolumeRef) => string,
  ) {}

  private async scratch(pool: PoolInfo, kind: string): Promise<string> {
    const dir = path.join(this.root(pool), SCRATCH_DIR, `${kind}-${randomHex(6)}`);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    return dir;
  }

  private async dropScratch(dir: string): Promise<void> {
    for (const entry of await readdir(dir).catch(() => [] as string[])) await this.subvolumes.delete(path.join(dir, entry));
    await this.subvolumes.removeEmptyDir(dir);
  }

  async send(
    pool: PoolInfo, vol: VolumeRef, snapshots: string[], write: (part: OptimizedPart, stream: Readable) => Promise<void>,
    amend?: (dir: string) => Promise<void>,
  ): Promise<{ subvolumes: SentSubvolume[] }> {
    const current = this.volumePath(pool, vol);
    if (!(await exists(current))) throw notFound(`Volume "${vol.name}" not found on storage pool "${pool.name}"`);
    const dir = await this.scratch(pool, 'send');
    try {
      const frozen = path.join(dir, VOLUME_ENTRY);
      // Amended in a writable copy, which becomes read-only for the send.
      await this.subvolumes.snapshot(current, frozen, !amend);
      if (amend) {
        await amend(frozen);
        await this.subvolumes.setReadonly(frozen, true);
      }
      const parts: { part: OptimizedPart; at: string; uuidOf: string }[] = snapshots.map((s) => {
        const at = this.snapshots.path(pool, vol, s);
        return { part: s, at, uuidOf: at };
      });
      // The header names the volume by its own UUID, as the reference's does; the stream carries the frozen copy.
      parts.push({ part: undefined, at: frozen, uuidOf: current });
      const header: SentSubvolume[] = [];
      let parent: string | undefined;
      for (const p of parts) {
        if (!(await exists(p.at))) throw notFound(`Snapshot "${p.part}" of volume "${vol.name}" not found`);
        header.push({ path: '/', snapshot: p.part ?? '', readonly: p.part !== undefined, uuid: await this.uuid(p.uuidOf) });
        await this.sendOne(p.at, parent, (stream) => write(p.part, stream));
        parent = p.at;
      }
      return { subvolumes: header };
    } finally {
      await this.dropScratch(dir);
    }
  }

  private async uuid(at: string): Promise<string> {
    const shown = await this.tools.run('btrfs', ['subvolume', 'show', at]);
    return /^\s*UUID:\s*(\S+)/m.exec(shown.stdout)?.[1] ?? '';
  }

  private async sendOne(at: string, parent: string | undefined, write: (stream: Readable) => Promise<void>): Promise<void> {
    const child = this.tools.spawn('btrfs', ['send', '-q', ...(parent ? ['-p', parent] : []), at], { endWithDaemon: true });
    child.stdin.end();
    const stderr = collect(child.stderr);
    const [written, code] = await Promise.allSettled([write(child.stdout), child.exited]);
    if (written.status === 'rejected') {
      child.kill('SIGKILL');
      throw written.reason;
    }
    const exit = code.status === 'fulfilled' ? code.value : -1;
    if (exit !== 0) throw new Error(`btrfs send of ${path.basename(at)} failed: ${(await stderr).trim()}`);
  }

  async receive(
    pool: PoolInfo, vol: VolumeRef, snapshots: string[], open: (part: OptimizedPart) => Promise<Readable>,
    prepare?: (dir: string, part: OptimizedPart) => Promise<void>,
  ): Promise<void> {
    const final = this.volumePath(pool, vol);
    if (await exists(final)) throw conflict(`Volume "${vol.name}" already exists on storage pool "${pool.name}"`);
    const dir = await this.scratch(pool, 'receive');
    let placed = false;
    try {
      const received = new Map<OptimizedPart, string>();
      for (const part of [...snapshots, undefined]) received.set(part, await this.receiveOne(dir, part, await open(part)));
      for (const name of snapshots) {
        const to = this.snapshots.path(pool, vol, name);
        await mkdir(path.dirname(to), { recursive: true, mode: 0o700 });
        placed = true;
        await this.place(received.get(name)!, to, name, prepare);
      }
      placed = true;
      await this.place(received.get(undefined)!, final, undefined, prepare);
    } catch (err) {
      if (placed) {
        await this.snapshots.deleteAll(pool, vol).catch(() => {});
        await this.subvolumes.delete(final).catch(() => {});
      }
      throw err;
    } finally {
      await this.dropScratch(dir);
    }
  }

  /** Receive one part's stream into `dir`; resolves with the one subvolume it made. */
  private async receiveOne(dir: string, part: OptimizedPart, input: Readable): Promise<string> {
    const before = new Set(await readdir(dir));
    // -e: stop at the stream's end marker (one subvolume per part); -C: paths in the stream stay inside dir.
    const child = this.tools.spawn('btrfs', ['receive', '-e', '-C', dir], { endWithDaemon: true });
    const stderr = collect(child.stderr);
    input.on('error', () => child.kill('SIGKILL'));
    child.stdin.on('error', () => {});
    input.pipe(child.stdin);
    const code = await child.exited;
    input.unpipe(child.stdin);
    input.destroy();
    if (code !== 0) {
      const why = (await stderr).trim().split('\n').pop() || `exit ${code}`;
      throw badRequest(`The btrfs stream of ${partName(part)} could not be received: ${why}`);
    }
    const made = (await readdir(dir)).filter((e) => !before.has(e));
    if (made.length !== 1 || !(await this.subvolumes.isSubvolume(path.join(dir, made[0]!)))) {
      throw badRequest(`The btrfs stream of ${partName(part)} does not hold exactly one subvolume`);
    }
    return path.join(dir, made[0]!);
  }

  /** A writable copy of `from` beside `to`, prepared, read-only for snapshots, renamed into place. */
  private async place(from: string, to: string, part: OptimizedPart, prepare?: (dir: string, part: OptimizedPart) => Promise<void>): Promise<void> {
    const building = path.join(path.dirname(to), BUILDING + path.basename(to));
    await this.subvolumes.delete(building);
    try {
      await this.subvolumes.snapshot(from, building);
      await chmod(building, VOLUME_MODE);
      await prepare?.(building, part);
      if (part !== undefined) await this.subvolumes.setReadonly(building, true);
      await rename(building, to);
    } catch (err) {
      await this.subvolumes.delete(building).catch(() => {});
      throw err;
    }
  }
}

function collect(stream: Readable | undefined): Promise<string> {
  if (!stream) return Promise.resolve('');
  let text = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    if (text.length < 8192) text += chunk;
  });
  return new Promise((resolve) => stream.on('close', () => resolve(text)).on('end', () => resolve(text)));
}
