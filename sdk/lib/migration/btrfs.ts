/**
 * btrfs send/receive over the fs websocket, as the reference's btrfs pools use it when both ends are
 * btrfs: with the `migration_header` feature the source first sends a JSON list of the subvolumes it
 * will send (then a barrier); then each part's `btrfs send` stream, each ended by a barrier: the
 * snapshots oldest first, each relative to the one before, then the volume relative to the last
 * snapshot. The target sends nothing on fs in this mode.
 */
import { Readable } from 'node:stream';
import type { MigrationChannel } from './channel.js';
import type { MigrationHeader } from './messages.js';

/**
 * The btrfs features this side takes: the header, but not nested subvolumes (`header_subvolumes`):
 * a source holding some then refuses rather than sending a tree with holes.
 */
export const OUR_BTRFS_FEATURES: NonNullable<MigrationHeader['btrfsFeatures']> = { migration_header: true, header_subvolumes: false };

/** One entry of the JSON header (field names are the reference's). */
export interface BtrfsSubvolumeEntry {
  path: string;
  /** The snapshot's name, '' for the volume. */
  snapshot: string;
  readonly: boolean;
  uuid?: string;
}

/** A header is a list of names, never large: more than this is a peer to refuse. */
const MAX_HEADER_BYTES = 4 * 1024 * 1024;

/** The subvolumes a volume with `snapshots` (oldest first) sends: their roots only. */
export function btrfsHeaderFor(snapshots: string[]): { subvolumes: BtrfsSubvolumeEntry[] } {
  return {
    subvolumes: [
      ...snapshots.map((snapshot) => ({ path: '/', snapshot, readonly: true })),
      { path: '/', snapshot: '', readonly: false },
    ],
  };
}

export async function sendBtrfsHeader(fs: MigrationChannel, snapshots: string[]): Promise<void> {
  await fs.send(Buffer.from(JSON.stringify(btrfsHeaderFor(snapshots))));
  await fs.sendBarrier();
}

/** Send one part's stream as binary frames, then the barrier that ends it. */
export async function sendBtrfsStream(fs: MigrationChannel, stream: Readable): Promise<void> {
  for await (const chunk of stream) await fs.send(chunk as Buffer);
  await fs.sendBarrier();
}

/** The bytes of one stream up to the peer's barrier, as a Readable (a closed socket errors it). */
export function btrfsStreamFrom(fs: MigrationChannel, signal?: AbortSignal, idleMs?: number): Readable {
  fs.lastActivity = Date.now();
  return Readable.from((async function* () {
    for (;;) {
      const item = await fs.next(signal, idleMs);
      if (item.kind === 'closed') throw new Error(item.reason);
      if (item.kind === 'barrier') return;
      yield item.bytes;
    }
  })(), { objectMode: false });
}

/**
 * Read the source's JSON header and check it names exactly the volume's root and one root per
 * expected snapshot: anything else (a nested path, an unknown or missing snapshot) is refused
 * before a stream is received.
 */
export async function receiveBtrfsHeader(fs: MigrationChannel, snapshots: string[], signal?: AbortSignal, idleMs?: number): Promise<BtrfsSubvolumeEntry[]> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const value of btrfsStreamFrom(fs, signal, idleMs)) {
    size += (value as Buffer).length;
    if (size > MAX_HEADER_BYTES) throw new Error('The source\'s btrfs migration header is larger than any list of subvolumes');
    chunks.push(value as Buffer);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new Error('The source sent a malformed btrfs migration header');
  }
  const list = (parsed as { subvolumes?: unknown })?.subvolumes;
  if (!Array.isArray(list)) throw new Error('The source\'s btrfs migration header lists no subvolumes');
  const expected = new Set(['', ...snapshots]);
  const seen = new Set<string>();
  for (const entry of list as BtrfsSubvolumeEntry[]) {
    if (typeof entry?.snapshot !== 'string' || entry.path !== '/') {
      throw new Error('The source\'s btrfs migration header names a nested subvolume, which this target does not take');
    }
    if (!expected.has(entry.snapshot) || seen.has(entry.snapshot)) {
      throw new Error(`The source's btrfs migration header names a subvolume that was not offered: "${String(entry.snapshot).slice(0, 64)}"`);
    }
    seen.add(entry.snapshot);
  }
  if (seen.size !== expected.size) throw new Error('The source\'s btrfs migration header leaves out offered subvolumes');
  return list as BtrfsSubvolumeEntry[];
}
