/**
 * Optimized backups with `btrfs send/receive`. The stream is one `btrfs send` per snapshot (oldest
 * first, each after the first relative to the one before, so shared extents travel once) and a
 * last one of a read-only snapshot of the volume's current content, named `.volume` (snapshot
 * names cannot start with a dot). `btrfs receive` takes the concatenated streams into a scratch
 * directory of the pool; the volume is then a writable snapshot of `.volume` and the snapshots
 * are read-only snapshots of the received ones. Scratch directories a killed daemon left are removed at the next mount.
 */
import { mkdir, readdir, rename } from 'node:fs/promises';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Readable, Writable } from 'node:stream';
import { badRequest, conflict, notFound, type HostTools, type PoolInfo, type VolumeRef, type VolumeSendReceive } from '../../sdk/index.js';
import { BUILDING, SCRATCH_DIR, VOLUME_MODE } from './layout.js';
import type { BtrfsSnapshots } from './snapshots.js';
import { Subvolumes, exists } from './subvolumes.js';
import { chmod } from 'node:fs/promises';

const VOLUME_ENTRY = '.volume';

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
    const dir = path.join(this.root(pool), SCRATCH_DIR, `${kind}-${randomBytes(6).toString('hex')}`);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    return dir;
  }

  private async dropScratch(dir: string): Promise<void> {
    for (const entry of await readdir(dir).catch(() => [] as string[])) await this.subvolumes.delete(path.join(dir, entry));
    await this.subvolumes.removeEmptyDir(dir);
  }

  async send(pool: PoolInfo, vol: VolumeRef, snapshots: string[], out: Writable): Promise<void> {
    const current = this.volumePath(pool, vol);
    if (!(await exists(current))) throw notFound(`Volume "${vol.name}" not found on storage pool "${pool.name}"`);
    const dir = await this.scratch(pool, 'send');
    try {
      const frozen = path.join(dir, VOLUME_ENTRY);
      await this.subvolumes.snapshot(current, frozen, true);
      let parent: string | undefined;
      for (const at of [...snapshots.map((s) => this.snapshots.path(pool, vol, s)), frozen]) {
        if (!(await exists(at))) throw notFound(`Snapshot "${path.basename(at)}" of volume "${vol.name}" not found`);
        await this.sendOne(at, parent, out);
        parent = at;
      }
    } finally {
      await this.dropScratch(dir);
    }
  }

  private async sendOne(at: string, parent: string | undefined, out: Writable): Promise<void> {
    const child = this.tools.spawn('btrfs', ['send', '-q', ...(parent ? ['-p', parent] : []), at], { endWithDaemon: true });
    child.stdin.end();
    const stderr = collect(child.stderr);
    const piped = new Promise<void>((resolve, reject) => {
      child.stdout.on('error', reject);
      out.on('error', reject);
      child.stdout.on('end', resolve);
      child.stdout.pipe(out, { end: false });
    });
    const code = await child.exited;
    await piped;
    if (code !== 0) throw new Error(`btrfs send failed: ${(await stderr).trim()}`);
  }

  async receive(pool: PoolInfo, vol: VolumeRef, snapshots: string[], input: Readable): Promise<void> {
    const final = this.volumePath(pool, vol);
    if (await exists(final)) throw conflict(`Volume "${vol.name}" already exists on storage pool "${pool.name}"`);
    const dir = await this.scratch(pool, 'receive');
    const moved: string[] = [];
    try {
      const child = this.tools.spawn('btrfs', ['receive', dir], { endWithDaemon: true });
      const stderr = collect(child.stderr);
      input.on('error', () => child.kill('SIGKILL'));
      child.stdin.on('error', () => {});
      input.pipe(child.stdin);
      const code = await child.exited;
      if (code !== 0) throw badRequest(`The optimized backup could not be received: ${(await stderr).trim().split('\n').pop()}`);
      const received = new Set(await readdir(dir));
      for (const name of [...snapshots, VOLUME_ENTRY]) {
        if (!received.has(name)) throw badRequest(`The optimized backup has no "${name === VOLUME_ENTRY ? 'volume' : name}" in its stream`);
      }
      const scratch = path.join(path.dirname(final), BUILDING + path.basename(final));
      await this.subvolumes.delete(scratch);
      await this.subvolumes.snapshot(path.join(dir, VOLUME_ENTRY), scratch);
      await chmod(scratch, VOLUME_MODE);
      await rename(scratch, final);
      for (const name of snapshots) {
        const to = this.snapshots.path(pool, vol, name);
        await mkdir(path.dirname(to), { recursive: true, mode: 0o700 });
        // A read-only subvolume cannot change parent directory: it is snapshotted into place.
        await this.subvolumes.snapshot(path.join(dir, name), to, true);
        moved.push(name);
      }
    } catch (err) {
      if (moved.length || (await exists(final))) {
        await this.snapshots.deleteAll(pool, vol).catch(() => {});
        await this.subvolumes.delete(final).catch(() => {});
      }
      throw err;
    } finally {
      await this.dropScratch(dir);
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
