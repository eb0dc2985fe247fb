/**
 * Instance migration between two corral daemons, second half (decision 0042), with the real `lxc`:
 * btrfs send/receive when both pools are btrfs (three snapshots, incremental streams, received
 * subvolumes), rsync when one side is not btrfs, `--refresh` on btrfs; the pools' `rsync.bwlimit`
 * and `rsync.compression` seen on the sending rsync; a target that goes silent (before its answer,
 * or after taking everything) fails the source's operation within the bound and frees the instance;
 * sources that lie (btrfs header, snapshot lists, a symlink swapped for a directory) leave nothing.
 */
import test from 'ava';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import bunyan from 'bunyan';
import { WebSocket } from 'ws';
import { createHostTools } from '../../kernel/host-tools/host-tools.js';
import {
  acceptOffer, CriuType, decodeControl, decodeHeader, encodeHeader, FsType, MigrationChannel, receiveOne, sendTree, type MigrationHeader,
} from '../../sdk/lib/migration/index.js';
import { killContainers, startDaemon, startWithPool, type Daemon } from '../helpers/daemon.js';
import { RemoteClient } from '../helpers/remotes.js';
import { fakeMigrationPeer, rsyncsUnder } from '../helpers/migration-peer.js';
import { startWithImage, stopImageDaemons } from '../helpers/image-daemon.js';
import { lxcOk, lxcWithInput } from '../helpers/clients.js';

const PASSWORD = 'migr2-pass-42';
const client = new RemoteClient(PASSWORD);
const { lxc: remoteLxc, ok, listen } = client;
/** The source's CORRAL_MIGRATION_TIMEOUT: a silent peer is given up after this many seconds. */
const BOUND_S = 5;
const tools = createHostTools(bunyan.createLogger({ name: 'migr2-test', level: 'fatal' }));
let source: Daemon;
let target: Daemon;
let scratch = '';

const poolRoot = (daemon: Daemon, pool: string) => path.join(daemon.dir, 'storage-pools', pool);
const volumeDir = (daemon: Daemon, pool: string, name: string, snapshot?: string) =>
  snapshot ? path.join(poolRoot(daemon, pool), 'containers-snapshots', name, snapshot) : path.join(poolRoot(daemon, pool), 'containers', name);
const marker = (daemon: Daemon, pool: string, name: string, snapshot?: string) => readFileSync(path.join(volumeDir(daemon, pool, name, snapshot), 'rootfs', 'marker'), 'utf8');
/** The init pool's name (a dir pool). */
const dirPool = (daemon: Daemon) => readdirSync(path.join(daemon.dir, 'storage-pools')).find((n) => n !== 'bt')!;


async function push(daemon: Daemon, name: string, content: string): Promise<void> {
  const res = await lxcWithInput(daemon.socket, content, 'file', 'push', '-', `${name}/marker`);
  if (res.status !== 0) throw new Error(`file push: ${res.stderr}`);
}

test.before(async () => {
  source = await startWithImage({ plugins: 'full', env: { CORRAL_MIGRATION_TIMEOUT: String(BOUND_S) } });
  target = await startWithPool({ plugins: 'full' });
  scratch = mkdtempSync(path.join(tmpdir(), 'corral-migr2-scratch-'));
  const [u1, u2] = await Promise.all([listen(source, '127.0.42.1'), listen(target, '127.0.42.2')]);
  for (const [name, url] of [['r1', u1], ['r2', u2]] as const) {
    const res = await remoteLxc('remote', 'add', name, url, '--password', PASSWORD, '--accept-certificate');
    if (res.status !== 0) throw new Error(`remote add ${name}: ${res.stderr}`);
  }
  for (const r of ['r1', 'r2']) {
    const res = await remoteLxc('storage', 'create', `${r}:bt`, 'btrfs', 'size=1GiB');
    if (res.status !== 0) throw new Error(`btrfs pool on ${r}: ${res.stderr}`);
  }
  // c1 on btrfs with three snapshots, each with its own marker.
  await lxcOk({ is: () => {} }, source.socket, 'init', 'bb', 'c1', '-s', 'bt');
  for (const [content, snapshot] of [['one', 's1'], ['two', 's2'], ['three', 's3'], ['four', undefined]] as const) {
    await push(source, 'c1', content);
    if (snapshot) await lxcOk({ is: () => {} }, source.socket, 'snapshot', 'c1', snapshot);
  }
  // c2 on the dir pool with one snapshot.
  await lxcOk({ is: () => {} }, source.socket, 'init', 'bb', 'c2');
  await push(source, 'c2', 'dir-one');
  await lxcOk({ is: () => {} }, source.socket, 'snapshot', 'c2', 's1');
  await push(source, 'c2', 'dir-two');
});

test.after.always(async () => {
  // The target first: after the kill -9 test it is a restarted daemon whose btrfs pool stays mounted until it stops.
  if (target) {
    killContainers(target.dir);
    await target.stop();
  }
  await stopImageDaemons();
  client.remove();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

/** The child processes a daemon's log shows it started since `from` (its output at debug level). */
function processesSince(daemon: Daemon, from: number): { command: string; args: string[] }[] {
  return daemon.output().slice(from).split('\n').filter((l) => l.includes('"host process"')).map((l) => JSON.parse(l));
}

test.serial('btrfs → btrfs: lxc copy goes by btrfs send/receive; three snapshots with their files, read-only, restorable; the copy starts', async (t) => {
  for (const r of ['r1:', 'r2:']) await ok(t, 'config', 'set', r, 'core.log_level', 'debug');
  const [fromSource, fromTarget] = [source.output().length, target.output().length];
  try {
    await ok(t, 'copy', 'r1:c1', 'r2:c1', '-s', 'bt');
  } finally {
    for (const r of ['r1:', 'r2:']) await remoteLxc('config', 'unset', r, 'core.log_level');
  }
  // The source sent each snapshot relative to the one before, the volume relative to the last; nothing went by rsync.
  const sent = processesSince(source, fromSource).filter((p) => p.command === 'btrfs' && p.args[0] === 'send');
  t.deepEqual(sent.map((p) => p.args.includes('-p')), [false, true, true, true], 'the first stream whole, the others incremental');
  t.true(sent[1]!.args[sent[1]!.args.indexOf('-p') + 1]!.endsWith('/s1'), 'snapshot s2 relative to s1');
  t.false(processesSince(source, fromSource).some((p) => p.command === 'rsync'));
  const received = processesSince(target, fromTarget).filter((p) => p.command === 'btrfs' && p.args[0] === 'receive');
  t.is(received.length, 4, 'three snapshots and the volume received');
  t.is(marker(target, 'bt', 'c1'), 'four');
  for (const [snap, content] of [['s1', 'one'], ['s2', 'two'], ['s3', 'three']]) {
    t.is(marker(target, 'bt', 'c1', snap), content);
    t.regex(spawnSync('btrfs', ['property', 'get', '-ts', volumeDir(target, 'bt', 'c1', snap), 'ro'], { encoding: 'utf8' }).stdout, /ro=true/);
  }
  const snaps = JSON.parse(await ok(t, 'query', 'r2:/1.0/instances/c1/snapshots?recursion=1'));
  t.deepEqual(snaps.map((s: any) => s.name), ['s1', 's2', 's3']);
  // Nothing of the pool's scratch is left.
  const leftovers = readdirSync(poolRoot(target, 'bt'), { recursive: true }).map(String).filter((p) => /(^|\/)(receive|send)-[0-9a-f]+$/.test(p));
  t.deepEqual(leftovers, []);
  await ok(t, 'restore', 'r2:c1', 's1');
  t.is(marker(target, 'bt', 'c1'), 'one', 'a received snapshot restores');
  await ok(t, 'start', 'r2:c1');
  t.is(await ok(t, 'exec', 'r2:c1', '--', 'cat', '/marker'), 'one');
  await ok(t, 'stop', 'r2:c1', '--force');
  t.is(marker(source, 'bt', 'c1'), 'four', 'the source is untouched');
});

test.serial('btrfs → dir and dir → btrfs negotiate down to rsync: same files and snapshots', async (t) => {
  const pool = dirPool(target);
  await ok(t, 'copy', 'r1:c1', 'r2:cd', '-s', pool);
  t.is(marker(target, pool, 'cd'), 'four');
  t.is(marker(target, pool, 'cd', 's2'), 'two');
  await ok(t, 'copy', 'r1:c2', 'r2:c2', '-s', 'bt');
  t.is(marker(target, 'bt', 'c2'), 'dir-two');
  t.is(marker(target, 'bt', 'c2', 's1'), 'dir-one');
  await ok(t, 'start', 'r2:c2');
  t.is(await ok(t, 'exec', 'r2:c2', '--', 'cat', '/marker'), 'dir-two');
  await ok(t, 'stop', 'r2:c2', '--force');
  for (const name of ['cd', 'c2']) await ok(t, 'delete', `r2:${name}`);
});

test.serial('lxc copy --refresh between btrfs pools brings the new snapshot and the changed files', async (t) => {
  await push(source, 'c1', 'five');
  await lxcOk(t, source.socket, 'snapshot', 'c1', 's4');
  await push(source, 'c1', 'six');
  await ok(t, 'copy', 'r1:c1', 'r2:c1', '--refresh');
  t.is(marker(target, 'bt', 'c1'), 'six');
  t.is(marker(target, 'bt', 'c1', 's4'), 'five');
  t.is(marker(target, 'bt', 'c1', 's1'), 'one');
  const snaps = JSON.parse(await ok(t, 'query', 'r2:/1.0/instances/c1/snapshots?recursion=1'));
  t.deepEqual(snaps.map((s: any) => s.name), ['s1', 's2', 's3', 's4']);
  await ok(t, 'delete', 'r2:c1');
});

/** Copy `from` to `to` while watching the source's sending rsync; resolves with its command line and the time taken. */
async function watchedCopy(t: any, from: string, to: string): Promise<{ cmd: string; ms: number }> {
  const started = Date.now();
  const copy = remoteLxc('copy', from, to);
  let cmd = '';
  let done = false;
  void copy.then(() => {
    done = true;
  });
  while (!done && !cmd) {
    cmd = rsyncsUnder(source.dir).find((c) => c.includes('-e ')) ?? '';
    if (!cmd) await new Promise((r) => setTimeout(r, 20));
  }
  const res = await copy;
  t.is(res.status, 0, res.stderr);
  return { cmd, ms: Date.now() - started };
}

test.serial('rsync.bwlimit and rsync.compression (storage_rsync_bwlimit, storage_rsync_compression): validated, and the sending rsync takes them', async (t) => {
  const pool = dirPool(source);
  const refused = await remoteLxc('storage', 'set', `r1:${pool}`, 'rsync.bwlimit', 'fast');
  t.not(refused.status, 0);
  t.regex(refused.stderr, /Invalid rsync\.bwlimit "fast"/);
  const notBool = await remoteLxc('storage', 'set', `r1:${pool}`, 'rsync.compression', 'maybe');
  t.not(notBool.status, 0);
  t.regex(notBool.stderr, /boolean/);
  const extensions = JSON.parse(await ok(t, 'query', 'r1:/1.0')).api_extensions;
  t.true(extensions.includes('storage_rsync_bwlimit') && extensions.includes('storage_rsync_compression'));

  await lxcOk(t, source.socket, 'init', 'bb', 'c4');
  // 3 MiB that no compression shrinks, at 1000 KiB/s: at least ~3 s.
  spawnSync('dd', ['if=/dev/urandom', `of=${path.join(volumeDir(source, pool, 'c4'), 'rootfs', 'noise')}`, 'bs=1M', 'count=3', 'status=none']);
  await ok(t, 'storage', 'set', `r1:${pool}`, 'rsync.bwlimit', '1000');
  t.is((await ok(t, 'storage', 'get', `r1:${pool}`, 'rsync.bwlimit')).trim(), '1000');
  try {
    const limited = await watchedCopy(t, 'r1:c4', 'r2:c4');
    t.regex(limited.cmd, /--bwlimit=1000/);
    t.regex(limited.cmd, /--compress/, 'both pools compress by default');
    t.true(limited.ms >= 2500, `3 MiB at 1000 KiB/s took ${limited.ms} ms`);
    // The target's pool refuses compression: the features agreed leave it out.
    await ok(t, 'storage', 'set', `r2:${dirPool(target)}`, 'rsync.compression', 'false');
    const plain = await watchedCopy(t, 'r1:c4', 'r2:c5');
    t.notRegex(plain.cmd, /--compress/);
    t.regex(plain.cmd, /--bwlimit=1000/);
    t.is(readFileSync(path.join(volumeDir(target, dirPool(target), 'c5'), 'rootfs', 'noise')).length, 3 * 1024 * 1024);
  } finally {
    await remoteLxc('storage', 'unset', `r1:${pool}`, 'rsync.bwlimit');
    await remoteLxc('storage', 'unset', `r2:${dirPool(target)}`, 'rsync.compression');
    for (const name of ['c4', 'c5']) await remoteLxc('delete', `r2:${name}`);
    await remoteLxc('delete', 'r1:c4');
  }
});

/** Open a source's migration operation over its unix socket and connect to both its websockets. */
async function joinSource(name: string): Promise<{ op: string; control: MigrationChannel; fs: MigrationChannel }> {
  const res = await source.request('POST', `/1.0/instances/${name}`, { migration: true, name });
  if (res.status !== 202) throw new Error(`migration source: ${res.body}`);
  const op = res.json.operation as string;
  const secrets = res.json.metadata.metadata as Record<string, string>;
  const open = (secret: string, label: string) => new Promise<MigrationChannel>((resolve, reject) => {
    const ws = new WebSocket(`ws+unix://${source.socket}:${op}/websocket?secret=${secret}`);
    ws.once('open', () => resolve(new MigrationChannel(ws, label)));
    ws.once('error', reject);
  });
  const control = await open(secrets.control!, 'control');
  const fs = await open(secrets.fs!, 'fs');
  return { op, control, fs };
}

test.serial('a target that connects and stays silent: the source fails within its bound, and the instance is free again', async (t) => {
  await lxcOk(t, source.socket, 'init', 'bb', 'c3');
  const started = Date.now();
  const { op, control, fs } = await joinSource('c3');
  const done = await source.request('GET', `${op}/wait?timeout=60`);
  const took = Date.now() - started;
  t.is(done.json.metadata.status, 'Failure');
  t.regex(done.json.metadata.err, /No message from the peer on the control websocket within 5 s/);
  t.true(took < (BOUND_S + 10) * 1000, `gave up after ${took} ms`);
  control.close();
  fs.close();
  await lxcOk(t, source.socket, 'start', 'c3');
  await lxcOk(t, source.socket, 'stop', 'c3', '--force');
});

test.serial('a target that takes every tree and then never answers: the source fails within its bound and the instance is free again', async (t) => {
  const { op, control, fs } = await joinSource('c3');
  const offer = await acceptOffer(control);
  const into = mkdtempSync(path.join(scratch, 'silent-'));
  await receiveOne(tools, into, fs, offer);
  t.true(existsSync(path.join(into, 'rootfs')), 'the tree arrived');
  const started = Date.now();
  const done = await source.request('GET', `${op}/wait?timeout=60`);
  t.is(done.json.metadata.status, 'Failure');
  t.regex(done.json.metadata.err, /No message from the peer on the control websocket within 5 s/);
  t.true(Date.now() - started < (BOUND_S + 10) * 1000);
  // The source told us why on the control socket.
  t.false(decodeControl(await control.message(undefined, 5000)).success);
  control.close();
  fs.close();
  await lxcOk(t, source.socket, 'delete', 'c3');
});

test.serial('a target that stops reading in the middle of a btrfs stream: the source fails within its bound and the instance is free again', async (t) => {
  await lxcOk(t, source.socket, 'init', 'bb', 'c7', '-s', 'bt');
  // More than the socket buffers and the reader's 16 MiB queue hold.
  spawnSync('dd', ['if=/dev/urandom', `of=${path.join(volumeDir(source, 'bt', 'c7'), 'rootfs', 'noise')}`, 'bs=1M', 'count=64', 'status=none']);
  const { op, control, fs } = await joinSource('c7');
  const offer = decodeHeader(await control.message(undefined, 5000));
  t.is(offer.fs, FsType.BTRFS, 'a btrfs pool offers btrfs');
  t.true(offer.btrfsFeatures?.migration_header);
  fs.socket.pause();
  await control.send(encodeHeader({ fs: FsType.BTRFS, btrfsFeatures: { migration_header: true } }));
  const started = Date.now();
  const done = await source.request('GET', `${op}/wait?timeout=60`);
  t.is(done.json.metadata.status, 'Failure');
  t.regex(done.json.metadata.err, /took nothing on the fs websocket for 5 s; it stopped reading/);
  t.true(Date.now() - started < (BOUND_S + 15) * 1000);
  control.close();
  fs.socket.terminate();
  const btrfsSends = readdirSync('/proc').filter((n) => /^\d+$/.test(n)).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('btrfs\0send') && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(source.dir);
    } catch {
      return false;
    }
  });
  t.deepEqual(btrfsSends, [], 'no btrfs send left running');
  await lxcOk(t, source.socket, 'delete', 'c7');
});

test.serial('wrong transfer types: a target answering btrfs to a dir source fails the source with a message; a source offering zfs is answered rsync', async (t) => {
  await lxcOk(t, source.socket, 'init', 'bb', 'c6');
  const { op, control, fs } = await joinSource('c6');
  const offer = decodeHeader(await control.message(undefined, 5000));
  t.is(offer.fs, FsType.RSYNC, 'a dir pool offers rsync');
  t.is(offer.criu, undefined, 'a stopped instance: no criu field');
  await control.send(encodeHeader({ fs: FsType.BTRFS }));
  const done = await source.request('GET', `${op}/wait?timeout=30`);
  t.is(done.json.metadata.status, 'Failure');
  t.regex(done.json.metadata.err, /transfer type 1, which was not offered/);
  t.false(decodeControl(await control.message(undefined, 5000)).success, 'the target is told');
  control.close();
  fs.close();
  await lxcOk(t, source.socket, 'delete', 'c6');

  let answer: MigrationHeader | undefined;
  const liar = await fakeSource(async (ctl, fsc) => {
    await ctl.send(encodeHeader({ fs: FsType.ZFS, snapshotNames: [] }));
    answer = decodeHeader(await ctl.message());
    // A zfs stream in place of rsync's: the receiving rsync refuses it.
    await fsc.send(Buffer.from('not an rsync stream'));
    await fsc.sendBarrier();
  });
  try {
    t.regex(await migrateInto(t, 'zfs', 'bt', liar), /rsync receive failed/);
    t.is(answer?.fs, FsType.RSYNC, 'even a btrfs pool answers rsync to a zfs offer');
  } finally {
    liar.close();
  }
});

/**
 * A fake migration source on loopback: once the target opened control and fs, `script` plays the
 * source's part with them. Records the target's messages.
 */
async function fakeSource(script: (control: MigrationChannel, fs: MigrationChannel) => Promise<void>) {
  const channels: Partial<Record<string, MigrationChannel>> = {};
  let played: Promise<void> | undefined;
  const peer = await fakeMigrationPeer('127.0.42.5', (secret, ws) => {
    channels[secret] = new MigrationChannel(ws, secret);
    if (channels.control && channels.fs && !played) played = script(channels.control, channels.fs).catch(() => {});
  });
  return {
    source: { type: 'migration', mode: 'pull', operation: peer.operation, certificate: peer.cert, secrets: { control: 'control', fs: 'fs' } },
    played: () => played,
    close: peer.close,
  };
}

/** POST a migration-sourced instance onto `pool` of the target, wait for its end; resolves with the error. */
async function migrateInto(t: any, name: string, pool: string, liar: Awaited<ReturnType<typeof fakeSource>>): Promise<string> {
  const res = await target.request('POST', '/1.0/instances', { name, source: liar.source, devices: { root: { type: 'disk', path: '/', pool } } });
  t.is(res.status, 202, res.body);
  const done = await target.request('GET', `${res.json.operation}/wait?timeout=60`);
  t.is(done.json.metadata.status, 'Failure');
  t.is((await target.request('GET', `/1.0/instances/${name}`)).status, 404, 'no instance');
  t.false(existsSync(volumeDir(target, pool, name)), 'no volume');
  return done.json.metadata.err as string;
}

const snapshotRecord = (name: string) => ({ name, ephemeral: false, architecture: 2, stateful: false });

test.serial('lying btrfs sources: a header naming a subvolume not offered, a nested path, or a stream that is not btrfs get a clear failure and leave nothing', async (t) => {
  const headers: [unknown, RegExp][] = [
    [{ subvolumes: [{ path: '/', snapshot: '../escape', readonly: true }, { path: '/', snapshot: '', readonly: false }] }, /not offered/],
    [{ subvolumes: [{ path: '/../..', snapshot: '', readonly: false }] }, /nested subvolume/],
    ['not json', /malformed btrfs migration header/],
  ];
  for (const [i, [json, pattern]] of headers.entries()) {
    let answer: MigrationHeader | undefined;
    const liar = await fakeSource(async (control, fs) => {
      await control.send(encodeHeader({ fs: FsType.BTRFS, btrfsFeatures: { migration_header: true }, snapshotNames: [], snapshots: [] }));
      answer = decodeHeader(await control.message());
      await fs.send(Buffer.from(typeof json === 'string' ? json : JSON.stringify(json)));
      await fs.sendBarrier();
    });
    try {
      t.regex(await migrateInto(t, `liar${i}`, 'bt', liar), pattern);
      t.is(answer?.fs, FsType.BTRFS, 'a btrfs pool answers btrfs');
    } finally {
      liar.close();
    }
  }
  // The header is fine, the stream is garbage: btrfs receive refuses it, the scratch is removed.
  const liar = await fakeSource(async (control, fs) => {
    await control.send(encodeHeader({ fs: FsType.BTRFS, btrfsFeatures: { migration_header: true }, snapshotNames: [], snapshots: [] }));
    await control.message();
    await fs.send(Buffer.from(JSON.stringify({ subvolumes: [{ path: '/', snapshot: '', readonly: false }] })));
    await fs.sendBarrier();
    await fs.send(Buffer.alloc(64 * 1024, 7));
    await fs.sendBarrier();
  });
  try {
    t.regex(await migrateInto(t, 'garbage', 'bt', liar), /btrfs stream of the volume could not be received/);
    const leftovers = readdirSync(poolRoot(target, 'bt'), { recursive: true }).map(String).filter((p) => /(^|\/)receive-[0-9a-f]+$/.test(p));
    t.deepEqual(leftovers, [], 'no scratch left');
  } finally {
    liar.close();
  }
});

test.serial('lying headers: 100000 snapshots, names with a NUL or over 255 bytes are refused before anything is written', async (t) => {
  const cases: [Partial<MigrationHeader>, RegExp][] = [
    [{ snapshotNames: Array.from({ length: 100_000 }, (_, i) => `s${i}`) }, /more than 10000 snapshots/],
    [{ snapshotNames: ['a\0b'], snapshots: [snapshotRecord('a\0b')] }, /invalid snapshot/],
    [{ snapshotNames: ['x'.repeat(300)] }, /overlong/],
    [{ snapshotNames: ['a/b'] }, /invalid snapshot "a\/b"/],
  ];
  for (const [i, [header, pattern]] of cases.entries()) {
    const liar = await fakeSource(async (control) => {
      await control.send(encodeHeader({ fs: FsType.RSYNC, ...header }));
    });
    try {
      t.regex(await migrateInto(t, `many${i}`, dirPool(target), liar), pattern);
    } finally {
      liar.close();
    }
  }
});

/**
 * Two trees a lying source sends one after the other: in the first, rootfs/link points at a directory
 * outside; in the second, rootfs/link is a directory holding a file `evil`.
 */
function symlinkPasses(secondPrefix: string): { outside: string; first: string; second: string } {
  const outside = mkdtempSync(path.join(scratch, 'outside-'));
  const first = mkdtempSync(path.join(scratch, 'first-'));
  const second = mkdtempSync(path.join(scratch, secondPrefix));
  mkdirSync(path.join(first, 'rootfs'));
  symlinkSync(outside, path.join(first, 'rootfs', 'link'));
  mkdirSync(path.join(second, 'rootfs', 'link'), { recursive: true });
  writeFileSync(path.join(second, 'rootfs', 'link', 'evil'), 'escaped');
  return { outside, first, second };
}

test.serial('a source that swaps a received symlink for a directory on its second pass writes nothing outside the volume', async (t) => {
  // First pass: rootfs/link points outside. Second pass (a "running" source's final sync): rootfs/link is a
  // directory holding a file. The receiving rsync replaces the link, never writes through it.
  const { outside, first, second } = symlinkPasses('second-');
  const liar = await fakeSource(async (control, fs) => {
    await control.send(encodeHeader({ fs: FsType.RSYNC, criu: CriuType.NONE, rsyncFeatures: { xattrs: true, delete: true } }));
    const answer = decodeHeader(await control.message());
    const features = { xattrs: !!answer.rsyncFeatures?.xattrs, delete: !!answer.rsyncFeatures?.delete };
    await sendTree(tools, first, fs, features, scratch);
    await sendTree(tools, second, fs, features, scratch);
    await control.message(undefined, 30_000);
  });
  try {
    const res = await target.request('POST', '/1.0/instances', { name: 'swapped', source: liar.source });
    t.is(res.status, 202, res.body);
    await target.request('GET', `${res.json.operation}/wait?timeout=60`);
    await liar.played();
    t.deepEqual(readdirSync(outside), [], 'nothing was written through the link');
    const link = path.join(volumeDir(target, dirPool(target), 'swapped'), 'rootfs', 'link');
    if (existsSync(link)) t.true(existsSync(path.join(link, 'evil')), 'the directory replaced the link inside the volume');
  } finally {
    liar.close();
    await target.request('DELETE', '/1.0/instances/swapped');
  }
});

test.serial('a source whose second pass names a file through the symlink its first pass made: the receiving rsync refuses to follow it', async (t) => {
  // A stock rsync sender never lists a path through a symlink; this one is made to, with -R and
  // --no-implied-dirs (the tools it runs under rewrite its source argument), as a malicious peer could.
  const { outside, first, second: crafted } = symlinkPasses('crafted-');
  const craftedTools = {
    ...tools,
    spawn: (command: string, args: string[], opts?: Parameters<typeof tools.spawn>[2]) =>
      tools.spawn(command, args.flatMap((a) => (a === `${crafted}/` ? ['-R', '--no-implied-dirs', `${crafted}/./rootfs/link/evil`] : [a])), opts),
  };
  const liar = await fakeSource(async (control, fs) => {
    await control.send(encodeHeader({ fs: FsType.RSYNC, criu: CriuType.NONE, rsyncFeatures: {} }));
    await control.message();
    await sendTree(tools, first, fs, {}, scratch);
    await sendTree(craftedTools, crafted, fs, {}, scratch).catch(() => {});
    await control.message(undefined, 30_000);
  });
  try {
    const res = await target.request('POST', '/1.0/instances', { name: 'through', source: liar.source });
    t.is(res.status, 202, res.body);
    const done = await target.request('GET', `${res.json.operation}/wait?timeout=60`);
    await liar.played();
    t.deepEqual(readdirSync(outside), [], 'nothing was written through the link');
    t.is(done.json.metadata.status, 'Failure', 'the receiving rsync reports the file it refused');
    t.regex(done.json.metadata.err, /Too many levels of symbolic links/);
    t.is((await target.request('GET', '/1.0/instances/through')).status, 404);
    t.false(existsSync(volumeDir(target, dirPool(target), 'through')), 'no volume');
  } finally {
    liar.close();
  }
});

test.serial('a source that sends a frame over the size limit instead of its header: a clear failure, and nothing is made', async (t) => {
  const liar = await fakeSource(async (control) => {
    await control.send(Buffer.alloc(101 * 1024 * 1024, 1));
  });
  try {
    t.regex(await migrateInto(t, 'huge', dirPool(target), liar), /frame larger than allowed on the control websocket/);
  } finally {
    liar.close();
  }
});

// Last: it kills the target daemon.
test.serial('kill -9 of the target mid btrfs receive: after its restart no instance, volume, snapshot or scratch subvolume is left; the source is untouched', async (t) => {
  await lxcOk(t, source.socket, 'init', 'bb', 'big', '-s', 'bt');
  spawnSync('dd', ['if=/dev/urandom', `of=${path.join(volumeDir(source, 'bt', 'big'), 'rootfs', 'big')}`, 'bs=1M', 'count=200', 'status=none']);
  await lxcOk(t, source.socket, 'snapshot', 'big', 'snap');
  const copy = remoteLxc('copy', 'r1:big', 'r2:big', '-s', 'bt');
  const scratchDir = path.join(poolRoot(target, 'bt'), '.scratch');
  const receiving = () => existsSync(scratchDir) && readdirSync(scratchDir).some((e) => e.startsWith('receive-'));
  for (let i = 0; i < 600 && !receiving(); i++) await new Promise((r) => setTimeout(r, 50));
  t.true(receiving(), 'the btrfs receive started');
  target.child.kill('SIGKILL');
  t.not((await copy).status, 0, 'the copy fails');
  target = await startDaemon({ dir: target.dir, plugins: 'full' });
  t.is((await target.request('GET', '/1.0/instances/big')).status, 404);
  t.false(existsSync(volumeDir(target, 'bt', 'big')), 'no volume');
  t.false(existsSync(volumeDir(target, 'bt', 'big', 'snap')), 'no snapshot');
  t.deepEqual(existsSync(scratchDir) ? readdirSync(scratchDir) : [], [], 'no scratch subvolume');
  t.is(JSON.parse(await ok(t, 'query', 'r1:/1.0/instances/big')).status, 'Stopped', 'the source is untouched and unlocked');
  await ok(t, 'delete', 'r1:big');
});
