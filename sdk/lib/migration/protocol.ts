/**
 * The two ends of a stopped-instance migration over the control and fs websockets. The source sends
 * its offer header; the target answers with the header it accepts (transfer type and rsync features);
 * the source then sends each snapshot's tree, oldest first, then the instance's tree, over fs; the
 * target ends with a control message saying whether it kept the result. Either side that fails sends a
 * control message with the failure, so the other stops.
 */
import type { HostTools } from '../../host-tools.js';
import type { MigrationChannel } from './channel.js';
import { CriuType, decodeControl, decodeHeader, encodeControl, encodeHeader, FsType, type MigrationHeader, type RsyncFeatures } from './messages.js';
import { headerSnapshotNames } from './names.js';
import { agreedFeatures, OUR_RSYNC_FEATURES, receiveTree, sendTree } from './rsync.js';

/** A control-socket message that is either the peer's header or its failure report. */
/** A peer sends its header as soon as both sockets are open, or answers an offer at once. */
const HEADER_TIMEOUT_MS = 30_000;

async function readHeader(control: MigrationChannel, signal?: AbortSignal): Promise<MigrationHeader> {
  const bytes = await control.message(signal, HEADER_TIMEOUT_MS);
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
}

/** The source's side: offer, send the trees the target accepted, wait for its verdict. */
export async function runSource(tools: HostTools, control: MigrationChannel, fs: MigrationChannel, trees: SourceTrees, scratch: string, signal?: AbortSignal): Promise<void> {
  try {
    // No `criu` field: that is a stopped instance. NONE would announce a running one sent stateless,
    // whose volume the target then expects a second time (the final sync after the stop).
    await control.send(encodeHeader({ ...trees.offer, fs: FsType.RSYNC, ...(trees.running ? { criu: CriuType.NONE } : {}), rsyncFeatures: OUR_RSYNC_FEATURES }));
    const answer = await readHeader(control, signal);
    if (answer.fs !== FsType.RSYNC) throw new Error(`The target asked for transfer type ${answer.fs}; only rsync is offered`);
    const features = agreedFeatures(answer.rsyncFeatures);
    // A refreshing target names the snapshots it lacks; only those go, in the offer's order.
    const asked = new Set(answer.snapshotNames ?? []);
    const sending = (trees.offer.snapshotNames ?? []).filter((name) => !answer.refresh || asked.has(name));
    for (const name of sending) await sendTree(tools, await trees.snapshotDir(name), fs, features, scratch, signal);
    await sendTree(tools, await trees.mainDir(), fs, features, scratch, signal);
    if (trees.running) await sendTree(tools, await trees.mainDir(), fs, features, scratch, signal);
    const verdict = tryControl(await control.message(signal));
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
}

/**
 * The target's first step: read and check the offer, answer with what we accept. Failures are the
 * caller's to report (finishTarget). A refresh (`have`: the snapshots the target already holds) asks
 * only for the offered snapshots it lacks; `snapshots` then lists just those.
 */
export async function acceptOffer(control: MigrationChannel, signal?: AbortSignal, have?: Set<string>): Promise<TargetOffer> {
  const header = await readHeader(control, signal);
  const offered = headerSnapshotNames(header);
  const snapshots = have ? offered.filter((name) => !have.has(name)) : offered;
  if (have) header.snapshots = (header.snapshots ?? []).filter((s) => !have.has(s.name));
  if (header.criu !== undefined && header.criu !== CriuType.NONE) {
    throw new Error('The source offers live state, which this target does not take');
  }
  const features = agreedFeatures(header.rsyncFeatures);
  const finalSync = header.criu === CriuType.NONE;
  // Whatever the source's own type, we answer rsync: the source then falls back to it.
  await control.send(encodeHeader({
    fs: FsType.RSYNC, ...(finalSync ? { criu: CriuType.NONE } : {}), snapshotNames: snapshots, snapshots: header.snapshots ?? [],
    rsyncFeatures: features, refresh: !!have,
  }));
  return { header, snapshots, features, finalSync };
}

/** Receive one tree (a snapshot's or the instance's) into `dir`. */
export function receiveOne(tools: HostTools, dir: string, fs: MigrationChannel, offer: TargetOffer, signal?: AbortSignal): Promise<void> {
  return receiveTree(tools, dir, fs, offer.features, signal);
}

/** The target's last word: whether it kept what it received. */
export async function finishTarget(control: MigrationChannel, err?: unknown): Promise<void> {
  if (err) return sendFailure(control, err);
  await control.send(encodeControl({ success: true }));
}
