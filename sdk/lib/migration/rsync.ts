/**
 * A directory tree over a migration fs websocket with rsync, as the reference's peers run it: the
 * receiver runs `rsync --server` on the socket's bytes; the sender runs the rsync client whose remote
 * shell is a relay (socat) to a private unix socket this process bridges to the websocket. Each tree
 * ends with a barrier from each side, so the next tree can use the same socket.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import path from 'node:path';
import type { Writable } from 'node:stream';
import type { HostProcess, HostTools } from '../../host-tools.js';
import type { MigrationChannel } from './channel.js';
import type { RsyncFeatures } from './messages.js';

/** The features this side offers and accepts (bidirectional needs the reference's own relay; not offered). */
/** Where a daemon's sending rsyncs reach their relays' unix sockets: root's alone. */
export async function relaySocketDir(dataDir: string): Promise<string> {
  const dir = path.join(dataDir, 'migration');
  await mkdir(dir, { recursive: true, mode: 0o700 });
  return dir;
}

export const OUR_RSYNC_FEATURES: RsyncFeatures = { xattrs: true, delete: true, compress: true };

/** Only what both sides asked for (`ours`: what this side takes, by default all it knows). */
export function agreedFeatures(offer: RsyncFeatures | undefined, ours: RsyncFeatures = OUR_RSYNC_FEATURES): RsyncFeatures {
  return { xattrs: !!offer?.xattrs && !!ours.xattrs, delete: !!offer?.delete && !!ours.delete, compress: !!offer?.compress && !!ours.compress };
}

/** The features this side offers when its pool's `rsync.compression` says whether to compress. */
export function rsyncFeaturesFor(compress = true): RsyncFeatures {
  return { ...OUR_RSYNC_FEATURES, compress };
}

/** How one rsync run is bounded and paced. */
export interface RsyncRunOptions {
  /** The sending rsync's `--bwlimit` (the source pool's `rsync.bwlimit`; empty or "0": none). */
  bwlimit?: string;
  /** Give up when nothing moved either way on the socket for this long. */
  idleMs?: number;
}

/** What rsync's --bwlimit takes: a rate in KiB/s, or with a unit suffix (1.5m, 10MB, 512KiB). */
export const BWLIMIT_PATTERN = /^\d+(\.\d+)?([KMGTPkmgtp]([iI]?[bB])?)?$/;

function featureArgs(features: RsyncFeatures): string[] {
  const args: string[] = [];
  // SELinux labels belong to the host that wrote them.
  if (features.xattrs) args.push('--xattrs', '--filter=-x security.selinux');
  if (features.delete) args.push('--delete');
  if (features.compress) args.push('--compress', '--compress-level=2');
  return args;
}

/** The variable the sending rsync's relay reads its unix socket's path from. */
const RELAY_ENV = 'CORRAL_MIGRATION_RELAY';

const withSlash = (dir: string) => (dir.endsWith('/') ? dir : `${dir}/`);

/** Copy the channel's frames of one stream into `sink` until the peer's barrier; throws if the socket closes first. */
async function pumpIn(channel: MigrationChannel, sink: Writable, signal?: AbortSignal, idleMs?: number): Promise<void> {
  for (;;) {
    const item = await channel.next(signal, idleMs);
    if (item.kind === 'closed') throw new Error(item.reason);
    if (item.kind === 'barrier') {
      sink.end();
      return;
    }
    if (!sink.destroyed && !sink.write(item.bytes)) await new Promise<void>((resolve) => {
      sink.once('drain', resolve);
      sink.once('close', resolve);
    });
  }
}

/** Send what `source` yields as binary frames, then our barrier. */
async function pumpOut(channel: MigrationChannel, source: AsyncIterable<Buffer>): Promise<void> {
  for await (const chunk of source) await channel.send(chunk);
  await channel.sendBarrier();
}

async function finish(child: HostProcess, label: string, pumps: Promise<void>[], stderr: () => string, signal?: AbortSignal): Promise<void> {
  const onAbort = () => child.kill('SIGKILL');
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    const results = await Promise.allSettled([child.exited, ...pumps]);
    const code = results[0].status === 'fulfilled' ? results[0].value : -1;
    const failed = results.slice(1).find((r): r is PromiseRejectedResult => r.status === 'rejected');
    // rsync's 24 is "some files vanished while sending": the tree is still whole for a stopped instance.
    if (code !== 0 && code !== 24) throw new Error(`rsync ${label} failed (exit ${code}): ${stderr().trim() || failed?.reason?.message || 'no output'}`);
    if (failed) throw failed.reason;
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
}

/** Receive one tree into `dir` (which exists). */
export async function receiveTree(tools: HostTools, dir: string, channel: MigrationChannel, features: RsyncFeatures, signal?: AbortSignal, opts: RsyncRunOptions = {}): Promise<void> {
  channel.lastActivity = Date.now();
  const child = tools.spawn('rsync', [
    '--server', '-vlogDtpre.iLsfx', '--numeric-ids', '--devices', '--partial', '--sparse', '--modify-window=-1',
    ...featureArgs(features), '.', withSlash(dir),
  ], { endWithDaemon: true });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    if (stderr.length < 8192) stderr += d.toString();
  });
  child.stdin.on('error', () => {});
  const inbound = pumpIn(channel, child.stdin, signal, opts.idleMs).catch((err) => {
    child.kill('SIGKILL');
    throw err;
  });
  await finish(child, 'receive', [inbound, pumpOut(channel, child.stdout)], () => stderr, signal);
}

/** Send the tree under `dir`; `scratch` is a private directory for the relay's unix socket. */
export async function sendTree(
  tools: HostTools, dir: string, channel: MigrationChannel, features: RsyncFeatures, scratch: string, signal?: AbortSignal, opts: RsyncRunOptions = {},
): Promise<void> {
  channel.lastActivity = Date.now();
  const sockDir = await mkdtemp(path.join(scratch, 'rsync-'));
  const sockPath = path.join(sockDir, `${randomUUID().slice(0, 8)}.sock`);
  const server = createServer();
  try {
    const accepted = new Promise<Socket>((resolve, reject) => {
      server.once('connection', resolve);
      server.once('error', reject);
    });
    await new Promise<void>((resolve, reject) => server.listen(sockPath, resolve).once('error', reject));
    // rsync appends the host and the server command to the remote shell: `sh -c` takes them as $0.. and
    // ignores them. The socket's path comes through the environment, so no quoting can break on it.
    // `-t 0`: once the receiver's side ended (it exits only after rsync's last word), socat's default
    // half-second linger only delays the sending rsync's exit, once per tree.
    const relay = `sh -c 'exec socat -t 0 - "UNIX-CONNECT:$${RELAY_ENV}"'`;
    const env = { ...(process.env as Record<string, string>), [RELAY_ENV]: sockPath };
    const child = tools.spawn('rsync', [
      '-ar', '--devices', '--numeric-ids', '--partial', '--sparse', ...featureArgs(features),
      ...(opts.bwlimit && opts.bwlimit !== '0' ? [`--bwlimit=${opts.bwlimit}`] : []),
      withSlash(dir), 'localhost:/ignored', '-e', relay,
    ], { endWithDaemon: true, env });
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => {
      if (stderr.length < 8192) stderr += d.toString();
    });
    const conn = await Promise.race([
      accepted,
      child.exited.then((code) => {
        throw new Error(`rsync send failed to start (exit ${code}): ${stderr.trim()}`);
      }),
    ]);
    server.close();
    conn.on('error', () => {});
    const inbound = pumpIn(channel, conn, signal, opts.idleMs).catch((err) => {
      child.kill('SIGKILL');
      throw err;
    });
    await finish(child, 'send', [inbound, pumpOut(channel, conn)], () => stderr, signal);
    conn.destroy();
  } finally {
    server.close();
    await rm(sockDir, { recursive: true, force: true });
  }
}
