/**
 * The wire sends snapshot trees before the instance's, while a volume is filled instance first and
 * snapshots after: each snapshot's tree is received into the new volume itself (so the next tree
 * comes over as a delta) and copied aside into a staging directory beside the volume (the same
 * filesystem, so the copy may share extents and handing one over is a rename). Staging directories
 * are removed whatever the outcome.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, readdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import type { HostTools } from '../../../sdk/index.js';

const PREFIX = '.migrating-';

/** A crash mid-migration leaves staging directories: at boot, remove those beside the volumes of `volumeDirs`. */
export async function removeStaleStaging(volumeDirs: string[]): Promise<void> {
  for (const parent of new Set(volumeDirs.map((d) => path.dirname(d)))) {
    for (const entry of await readdir(parent).catch(() => [] as string[])) {
      if (entry.startsWith(PREFIX)) await rm(path.join(parent, entry), { recursive: true, force: true });
    }
  }
}

export class SnapshotStaging {
  private readonly dirs = new Map<string, string>();
  private readonly roots = new Set<string>();
  private readonly tag = randomUUID().slice(0, 8);

  constructor(private readonly tools: HostTools) {}

  /** A fresh staging directory for `snapshot`, beside the volume directory `volumeDir`. */
  async create(volumeDir: string, snapshot: string): Promise<string> {
    const root = path.join(path.dirname(volumeDir), `${PREFIX}${this.tag}-${path.basename(volumeDir)}`);
    this.roots.add(root);
    const dir = path.join(root, snapshot);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    this.dirs.set(snapshot, dir);
    return dir;
  }

  /** Keep what `volumeDir` holds now as `snapshot`'s tree, to hand over once the volume is whole. */
  async capture(volumeDir: string, snapshot: string): Promise<void> {
    const dir = await this.create(volumeDir, snapshot);
    await this.copyTree(volumeDir, dir);
  }

  /** `cp -a` keeps owners, modes, times, xattrs, ACLs, hard links and symlinks as they are (never followed). */
  private async copyTree(from: string, into: string): Promise<void> {
    await this.tools.run('cp', ['-a', '--reflink=auto', '--no-target-directory', '--', `${from}/.`, into], { timeoutMs: 3_600_000, endWithDaemon: true });
  }

  /**
   * Move a staged tree into the snapshot's directory, entry by entry: the directory itself may be
   * the driver's (a btrfs subvolume), so it is filled, never replaced.
   */
  async handOver(snapshot: string, into: string): Promise<void> {
    const staged = this.dirs.get(snapshot);
    if (!staged) throw new Error(`Snapshot "${snapshot}" was not received`);
    try {
      for (const entry of await readdir(staged)) await rename(path.join(staged, entry), path.join(into, entry));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
      // Another filesystem (a btrfs subvolume): copy the tree as it is, sharing extents where the pool can.
      await this.copyTree(staged, into);
    }
    this.dirs.delete(snapshot);
  }

  async cleanup(): Promise<void> {
    for (const root of this.roots) await rm(root, { recursive: true, force: true }).catch(() => {});
    this.roots.clear();
    this.dirs.clear();
  }
}
