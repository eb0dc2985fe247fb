/**
 * The two ends of a stopped-instance migration over the control and fs websockets. The source sends
 * its offer header; the target answers with the header it accepts (transfer type and rsync features);
 * the source then sends each snapshot's tree, oldest first, then the instance's tree, over fs; the
 * target ends with a control message saying whether it kept the result. Either side that fails sends a
 * control message with the failure, so the other stops.
 */
import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { HostTools } from '../../host-tools.js';
import { migrationBounds, type MigrationBounds } from './bounds.js';
import { OUR_BTRFS_FEATURES, sendBtrfsHeader, sendBtrfsStream } from './btrfs.js';
import type { MigrationChannel } from './channel.js';
import { CriuType, decodeControl, decodeHeader, encodeControl, encodeHeader, FsType, type MigrationHeader, type RsyncFeatures } from './messages.js';
import { headerSnapshotNames } from './names.js';
import { agreedFeatures, receiveTree, rsyncFeaturesFor, sendTree } from './rsync.js';

/** The peer's header, or its failure report in its place; a peer sends its header at once. */
async function readHeader(control: MigrationChannel, signal?: AbortSignal, bounds: MigrationBounds = migrationBounds()): Promise<MigrationHeader> {
  const bytes = await control.message(signal, bounds.answerMs);
  let header: MigrationHeader;
  try {
    header = decodeHeader(bytes);
  } catch {
    const failure = tryControl(bytes);
    if (failure && !failure.success) throw new Error(`The peer failed: ${failure.message || 'no reason given'}`);
    throw new Error('The peer sent a malformed migration header');
  }
  return header;
}

function tryControl(bytes: Buffer) {
  try {
    return decodeControl(bytes);
  } catch {
    return undefined;
  }
}

/** Tell the peer we failed; a socket already gone has nobody to tell. */
export async function sendFailure(control: MigrationChannel, err: unknown): Promise<void> {
  await control.send(encodeControl({ success: false, message: (err as Error)?.message ?? String(err) })).catch(() => {});
}

export interface SourceTrees {
  /** The offer: snapshot names and records (oldest first), volume size. */
  offer: Omit<MigrationHeader, 'fs' | 'criu' | 'rsyncFeatures'>;
  /**
   * The instance runs and is sent stateless: announced with `criu: NONE`, its tree goes twice, the
   * second pass taking what changed during the first.
   */
  running?: boolean;
  /** Directories to send, by snapshot name. */
  snapshotDir(name: string): Promise<string>;
  mainDir(): Promise<string>;
  /**
   * The source's pool sends btrfs streams: the offer is BTRFS (rsync stays the fallback the target
   * may answer). Sends the given snapshots (oldest first, each relative to the one before), then the
   * volume, handing each part's stream to `write`.
   */
  sendBtrfs?(snapshots: string[], write: (part: string | undefined, stream: Readable) => Promise<void>): Promise<unknown>;
  /** The source pool's `rsync.bwlimit` and `rsync.compression`. */
  rsync?: { bwlimit?: string; compress?: boolean };
}

/** The source's side: offer, send the trees the target accepted, wait for its verdict. */
export async function runSource(
  tools: HostTools, control: MigrationChannel, fs: MigrationChannel, trees: SourceTrees, scratch: string, signal?: AbortSignal,
  bounds: MigrationBounds = migrationBounds(),
): Promise<void> {
  // A peer that stops reading must not hold a send (and so the instance) forever either.
  fs.sendBoundMs ??= bounds.idleMs;
  control.sendBoundMs ??= bounds.answerMs;
  try {
    const ourRsync = rsyncFeaturesFor(trees.rsync?.compress ?? true);
    // A running instance goes by rsync: its second pass (after the first) is an rsync's to make.
    const btrfs = trees.sendBtrfs && !trees.running;
    // No `criu` field: that is a stopped instance. NONE would announce a running one sent stateless,
    // whose volume the target then expects a second time (the final sync after the stop).
    await control.send(encodeHeader({
      ...trees.offer, fs: btrfs ? FsType.BTRFS : FsType.RSYNC, ...(trees.running ? { criu: CriuType.NONE } : {}),
      rsyncFeatures: ourRsync, ...(btrfs ? { btrfsFeatures: OUR_BTRFS_FEATURES } : {}),
    }));
    const answer = await readHeader(control, signal, bounds);
    if (answer.fs !== FsType.RSYNC && !(btrfs && answer.fs === FsType.BTRFS)) {
      throw new Error(`The target asked for transfer type ${answer.fs}, which was not offered`);
    }
    // A refreshing target names the snapshots it lacks; only those go, in the offer's order.
    const asked = new Set(answer.snapshotNames ?? []);
    const sending = (trees.offer.snapshotNames ?? []).filter((name) => !answer.refresh || asked.has(name));
    if (answer.fs === FsType.BTRFS) {
      if (answer.btrfsFeatures?.migration_header) await sendBtrfsHeader(fs, sending);
      await trees.sendBtrfs!(sending, (_part, stream) => sendBtrfsStream(fs, stream));
    } else {
      const features = agreedFeatures(answer.rsyncFeatures, ourRsync);
      const run = { bwlimit: trees.rsync?.bwlimit, idleMs: bounds.idleMs };
      for (const name of sending) await sendTree(tools, await trees.snapshotDir(name), fs, features, scratch, signal, run);
      await sendTree(tools, await trees.mainDir(), fs, features, scratch, signal, run);
      if (trees.running) await sendTree(tools, await trees.mainDir(), fs, features, scratch, signal, run);
    }
    // Bounded: a target that took everything and then stays silent must not hold the instance forever.
    const verdict = tryControl(await control.message(signal, bounds.verdictMs));
    if (!verdict) throw new Error('The target sent a malformed control message');
    if (!verdict.success) throw new Error(`The target failed: ${verdict.message || 'no reason given'}`);
  } catch (err) {
    await sendFailure(control, err);
    throw err;
  }
}

export interface TargetOffer {
  header: MigrationHeader;
  /** Checked snapshot names, oldest first. */
  snapshots: string[];
  features: RsyncFeatures;
  /** The source sends the instance's tree twice (a running instance copied stateless: the second after it stops). */
  finalSync: boolean;
  /** The transfer type answered: RSYNC (also when absent), or BTRFS when both pools are btrfs (then see `btrfsHeader`). */
  fs?: number;
  /** BTRFS: the source sends its JSON list of subvolumes before the streams. */
  btrfsHeader?: boolean;
  /** The bounds this side waits with (the defaults when absent). */
  bounds?: MigrationBounds;
}

/** What the target's pool allows. */
export interface AcceptOptions {
  /** The target's pool receives btrfs streams. */
  btrfs?: boolean;
  /** The target pool's `rsync.compression` (default true). */
  compress?: boolean;
  /** The instance's snapshots are not wanted (`instance_only`): streams relative to them cannot be taken, so rsync. */
  instanceOnly?: boolean;
  bounds?: MigrationBounds;
}

/**
 * The target's first step: read and check the offer, answer with what we accept. Failures are the
 * caller's to report (finishTarget). A refresh (`have`: the snapshots the target already holds) asks
 * only for the offered snapshots it lacks; `snapshots` then lists just those.
 */
export async function acceptOffer(control: MigrationChannel, signal?: AbortSignal, have?: Set<string>, opts: AcceptOptions = {}): Promise<TargetOffer> {
  const bounds = opts.bounds ?? migrationBounds();
  control.sendBoundMs ??= bounds.answerMs;
  const header = await readHeader(control, signal, bounds);
  const offered = headerSnapshotNames(header);
  const snapshots = have ? offered.filter((name) => !have.has(name)) : offered;
  if (have) header.snapshots = (header.snapshots ?? []).filter((s) => !have.has(s.name));
  if (header.criu !== undefined && header.criu !== CriuType.NONE) {
    throw new Error('The source offers live state, which this target does not take');
  }
  const features = agreedFeatures(header.rsyncFeatures, rsyncFeaturesFor(opts.compress ?? true));
  const finalSync = header.criu === CriuType.NONE;
  // btrfs streams only between btrfs pools, for a whole new copy of a stopped instance; any other
  // case answers rsync, which every source falls back to.
  const btrfs = header.fs === FsType.BTRFS && !!opts.btrfs && !have && !finalSync && !(opts.instanceOnly && snapshots.length);
  const btrfsFeatures = btrfs ? { migration_header: !!header.btrfsFeatures?.migration_header, header_subvolumes: false } : undefined;
  await control.send(encodeHeader({
    fs: btrfs ? FsType.BTRFS : FsType.RSYNC, ...(finalSync ? { criu: CriuType.NONE } : {}), snapshotNames: snapshots, snapshots: header.snapshots ?? [],
    rsyncFeatures: features, refresh: !!have, ...(btrfsFeatures ? { btrfsFeatures } : {}),
  }));
  return { header, snapshots, features, finalSync, fs: btrfs ? FsType.BTRFS : FsType.RSYNC, btrfsHeader: btrfsFeatures?.migration_header, bounds };
}

/** Receive one tree (a snapshot's or the instance's) into `dir`; answers the bytes that came over fs for it. */
export async function receiveOne(tools: HostTools, dir: string, fs: MigrationChannel, offer: TargetOffer, signal?: AbortSignal): Promise<number> {
  const idleMs = (offer.bounds ?? migrationBounds()).idleMs;
  // rsync's answers go back on fs: a source that stops reading them must not hold us either.
  fs.sendBoundMs ??= idleMs;
  const before = fs.received;
  await receiveTree(tools, dir, fs, offer.features, signal, { idleMs });
  return fs.received - before;
}

/**
 * Receive the next tree over the one before it in `dir`, so rsync moves only what differs (trees
 * come oldest snapshot first). Without rsync's delete agreed, `dir` is emptied first, so no file of
 * the tree before lingers; the whole tree then comes over.
 */
export async function receiveOver(tools: HostTools, dir: string, fs: MigrationChannel, offer: TargetOffer, signal?: AbortSignal): Promise<number> {
  if (!offer.features.delete) {
    for (const entry of await readdir(dir)) await rm(path.join(dir, entry), { recursive: true, force: true });
  }
  return receiveOne(tools, dir, fs, offer, signal);
}

/** The target's last word: whether it kept what it received. */
export async function finishTarget(control: MigrationChannel, err?: unknown): Promise<void> {
  if (err) return sendFailure(control, err);
  await control.send(encodeControl({ success: true }));
}
