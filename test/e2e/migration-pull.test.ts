/**
 * Instance migration between two corral daemons over HTTPS on loopback, pull mode, `dir` pools, with
 * the real `lxc`: a stopped container with two snapshots copies across (files of the instance and of
 * each snapshot, snapshot records), starts there; `--instance-only` leaves the snapshots behind;
 * `lxc move` removes the source. A bad migration source is refused before anything is made.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { killContainers, startDaemon, startWithPool, type Daemon } from '../helpers/daemon.js';
import { RemoteClient } from '../helpers/remotes.js';
import { fsProgressOf, headerPeer, rsyncsUnder } from '../helpers/migration-peer.js';
import { startWithImage, stopImageDaemons } from '../helpers/image-daemon.js';
import { lxcOk, lxcWithInput } from '../helpers/clients.js';
import { decodeControl, FsType } from '../../sdk/lib/migration/index.js';

const PASSWORD = 'migr-pass-17';
const client = new RemoteClient(PASSWORD);
const { lxc: remoteLxc, ok, listen } = client;
let source: Daemon;
let target: Daemon;

/** Where a daemon's default dir pool keeps a container's files, or one of its snapshots'. */
function volumeDir(daemon: Daemon, name: string, snapshot?: string): string {
  const pools = path.join(daemon.dir, 'storage-pools');
  const pool = readdirSync(pools)[0]!;
  return snapshot ? path.join(pools, pool, 'containers-snapshots', name, snapshot) : path.join(pools, pool, 'containers', name);
}

const marker = (daemon: Daemon, name: string, snapshot?: string) => readFileSync(path.join(volumeDir(daemon, name, snapshot), 'rootfs', 'marker'), 'utf8');

test.before(async () => {
  source = await startWithImage({ plugins: 'full' });
  target = await startWithPool({ plugins: 'full' });
  const [u1, u2] = await Promise.all([listen(source, '127.0.17.1'), listen(target, '127.0.17.2')]);
  for (const [name, url] of [['r1', u1], ['r2', u2]] as const) {
    const res = await remoteLxc('remote', 'add', name, url, '--password', PASSWORD, '--accept-certificate');
    if (res.status !== 0) throw new Error(`remote add ${name}: ${res.stderr}`);
  }
  await lxcOk({ is: () => {} }, source.socket, 'init', 'bb', 'c1');
  for (const [content, snapshot] of [['one', 's1'], ['two', 's2'], ['three', undefined]] as const) {
    const res = await lxcWithInput(source.socket, content, 'file', 'push', '-', 'c1/marker');
    if (res.status !== 0) throw new Error(`file push: ${res.stderr}`);
    if (snapshot) await lxcOk({ is: () => {} }, source.socket, 'snapshot', 'c1', snapshot);
  }
});

test.after.always(async () => {
  if (target) killContainers(target.dir);
  await stopImageDaemons();
  client.remove();
});

test.serial('lxc copy r1:c1 r2:c1 carries the stopped container and its two snapshots, which start there', async (t) => {
  await ok(t, 'copy', 'r1:c1', 'r2:c1');
  t.is(marker(target, 'c1'), 'three');
  t.is(marker(target, 'c1', 's1'), 'one');
  t.is(marker(target, 'c1', 's2'), 'two');
  const snaps = JSON.parse(await ok(t, 'query', 'r2:/1.0/instances/c1/snapshots?recursion=1'));
  t.deepEqual(snaps.map((s: any) => s.name), ['s1', 's2']);
  const original = JSON.parse(await ok(t, 'query', 'r1:/1.0/instances/c1/snapshots/s1'));
  t.is(snaps[0].created_at.slice(0, 19), original.created_at.slice(0, 19), 'the snapshot keeps its creation time');
  t.deepEqual(snaps[0].profiles, original.profiles);
  const inst = JSON.parse(await ok(t, 'query', 'r2:/1.0/instances/c1'));
  t.is(inst.status, 'Stopped');
  t.is(inst.config['image.os'] !== undefined, true, 'the image keys came along with the config');
  await ok(t, 'start', 'r2:c1');
  t.is((await ok(t, 'exec', 'r2:c1', '--', 'cat', '/marker')), 'three');
  await ok(t, 'stop', 'r2:c1', '--force');
  // The source is untouched and its operation ended well.
  t.is(marker(source, 'c1'), 'three');
  t.is(JSON.parse(await ok(t, 'query', 'r1:/1.0/instances/c1')).status, 'Stopped');
  t.false(readdirSync(path.dirname(volumeDir(target, 'c1'))).some((n) => n.startsWith('.migrating-')), 'no staging left');
});

test.serial('lxc copy --instance-only leaves the snapshots behind', async (t) => {
  await ok(t, 'copy', 'r1:c1', 'r2:c2', '--instance-only');
  t.is(marker(target, 'c2'), 'three');
  t.deepEqual(JSON.parse(await ok(t, 'query', 'r2:/1.0/instances/c2/snapshots')), []);
  t.false(existsSync(volumeDir(target, 'c2', 's1')));
});

test.serial('lxc copy --refresh (container_incremental_copy) brings only the new snapshot and the changed files; the target keeps its own', async (t) => {
  await ok(t, 'snapshot', 'r2:c1', 'mine');
  const push = await lxcWithInput(source.socket, 'four', 'file', 'push', '-', 'c1/marker');
  t.is(push.status, 0, push.stderr);
  await lxcOk(t, source.socket, 'snapshot', 'c1', 's3');
  await ok(t, 'copy', 'r1:c1', 'r2:c1', '--refresh');
  t.is(marker(target, 'c1'), 'four');
  t.is(marker(target, 'c1', 's3'), 'four');
  t.is(marker(target, 'c1', 's1'), 'one', 'an existing snapshot is left as it was');
  const names = JSON.parse(await ok(t, 'query', 'r2:/1.0/instances/c1/snapshots?recursion=1')).map((s: any) => s.name).sort();
  t.deepEqual(names, ['mine', 's1', 's2', 's3']);
  // Back to the state the later tests expect.
  await lxcOk(t, source.socket, 'delete', 'c1/s3');
  const back = await lxcWithInput(source.socket, 'three', 'file', 'push', '-', 'c1/marker');
  t.is(back.status, 0, back.stderr);
});

test.serial('lxc copy -s onto a btrfs pool of the target: the snapshots become subvolumes with their files', async (t) => {
  await ok(t, 'storage', 'create', 'r2:bt', 'btrfs', 'size=1GiB');
  try {
    await ok(t, 'copy', 'r1:c1', 'r2:cb', '-s', 'bt');
    const root = path.join(target.dir, 'storage-pools', 'bt');
    t.is(readFileSync(path.join(root, 'containers', 'cb', 'rootfs', 'marker'), 'utf8'), 'three');
    t.is(readFileSync(path.join(root, 'containers-snapshots', 'cb', 's1', 'rootfs', 'marker'), 'utf8'), 'one');
    t.is(readFileSync(path.join(root, 'containers-snapshots', 'cb', 's2', 'rootfs', 'marker'), 'utf8'), 'two');
    t.false(readdirSync(path.join(root, 'containers')).some((n) => n.startsWith('.migrating-')), 'no staging left');
    await ok(t, 'start', 'r2:cb');
    t.is(await ok(t, 'exec', 'r2:cb', '--', 'cat', '/marker'), 'three');
  } finally {
    await remoteLxc('delete', '--force', 'r2:cb');
    await remoteLxc('storage', 'delete', 'r2:bt');
  }
});

test.serial('a running container copies --stateless (its files as they are); without --stateless lxc asks for live and is refused', async (t) => {
  await ok(t, 'launch', 'r1:bb', 'r1:run');
  try {
    await ok(t, 'exec', 'r1:run', '--', 'sh', '-c', 'echo alive > /marker');
    const live = await remoteLxc('copy', 'r1:run', 'r2:run');
    t.not(live.status, 0);
    t.regex(live.stderr, /Live migration is not supported/);
    t.is((await target.request('GET', '/1.0/instances/run')).status, 404);
    await ok(t, 'copy', 'r1:run', 'r2:run', '--stateless');
    t.is(marker(target, 'run'), 'alive\n');
    t.is(JSON.parse(await ok(t, 'query', 'r1:/1.0/instances/run')).status, 'Running', 'the source keeps running');
    t.is(JSON.parse(await ok(t, 'query', 'r2:/1.0/instances/run')).status, 'Stopped');
    await ok(t, 'start', 'r2:run');
    t.is(await ok(t, 'exec', 'r2:run', '--', 'cat', '/marker'), 'alive\n');
  } finally {
    await remoteLxc('delete', '--force', 'r1:run');
    await remoteLxc('delete', '--force', 'r2:run');
  }
});

test.serial('lxc copy --mode push (container_push, container_push_target): the source connects to the target operation; same files and snapshots', async (t) => {
  await ok(t, 'copy', 'r1:c1', 'r2:cp', '--mode', 'push');
  t.is(marker(target, 'cp'), 'three');
  t.is(marker(target, 'cp', 's1'), 'one');
  t.deepEqual(JSON.parse(await ok(t, 'query', 'r2:/1.0/instances/cp/snapshots?recursion=1')).map((s: any) => s.name), ['s1', 's2']);
  await ok(t, 'start', 'r2:cp');
  t.is(await ok(t, 'exec', 'r2:cp', '--', 'cat', '/marker'), 'three');
  await ok(t, 'stop', 'r2:cp', '--force');
});

test.serial('lxc copy --mode relay: the client relays between the source and the target operations', async (t) => {
  await ok(t, 'copy', 'r1:c1', 'r2:cr', '--mode', 'relay');
  t.is(marker(target, 'cr'), 'three');
  t.is(marker(target, 'cr', 's2'), 'two');
  t.deepEqual(JSON.parse(await ok(t, 'query', 'r2:/1.0/instances/cr/snapshots?recursion=1')).map((s: any) => s.name), ['s1', 's2']);
});

test.serial('lxc move r1:c1 r2:c3 moves it: the source is gone, the target has it with its snapshots', async (t) => {
  await ok(t, 'move', 'r1:c1', 'r2:c3');
  t.is(marker(target, 'c3'), 'three');
  t.is(marker(target, 'c3', 's2'), 'two');
  t.is((await remoteLxc('query', 'r1:/1.0/instances/c1')).status === 0, false, 'the source instance is gone');
});

test.serial('a migration source the target cannot reach fails the operation and leaves nothing', async (t) => {
  const res = await target.request('POST', '/1.0/instances', {
    name: 'lost', source: {
      type: 'migration', mode: 'pull', operation: 'https://127.0.17.1:1/1.0/operations/nothing',
      certificate: readFileSync(path.join(source.dir, 'server.crt'), 'utf8'), secrets: { control: 'a', fs: 'b' },
    },
  });
  t.is(res.status, 202, res.body);
  const done = await target.request('GET', `${res.json.operation}/wait?timeout=30`);
  t.is(done.json.metadata.status, 'Failure');
  t.regex(done.json.metadata.err, /reach the migration source/);
  t.is((await target.request('GET', '/1.0/instances/lost')).status, 404);
  t.false(existsSync(volumeDir(target, 'lost')));
});

test.serial('bad migration sources are refused with a 400 before anything starts', async (t) => {
  const cert = readFileSync(path.join(source.dir, 'server.crt'), 'utf8');
  const base = { type: 'migration', mode: 'pull', operation: 'https://127.0.17.1:1/1.0/operations/x', certificate: cert, secrets: { control: 'a', fs: 'b' } };
  for (const [sourceField, pattern] of [
    [{ ...base, mode: 'relay' }, /mode "relay"/],
    [{ ...base, operation: 'http://127.0.17.1/1.0/operations/x' }, /https URL/],
    [{ ...base, secrets: { control: 'a' } }, /"control" and "fs"/],
    [{ ...base, certificate: '' }, /certificate/],
    [{ ...base, live: true }, /Live migration/],
  ] as const) {
    const res = await target.request('POST', '/1.0/instances', { name: 'bad', source: sourceField });
    t.is(res.status, 400, res.body);
    t.regex(res.json.error, pattern);
  }
});

test.serial('a source that lies in its header (a snapshot named "../escape") gets a failure on control, and nothing is made', async (t) => {
  const liar = await headerPeer('127.0.17.5', { fs: FsType.RSYNC, snapshotNames: ['../escape'] });
  try {
    const res = await target.request('POST', '/1.0/instances', {
      name: 'lied', source: { type: 'migration', mode: 'pull', operation: liar.operation, certificate: liar.cert, secrets: { control: 'control', fs: 'fs' } },
    });
    t.is(res.status, 202, res.body);
    const done = await target.request('GET', `${res.json.operation}/wait?timeout=30`);
    t.is(done.json.metadata.status, 'Failure');
    t.regex(done.json.metadata.err, /invalid snapshot "\.\.\/escape"/);
    t.is(liar.answers.length, 1, 'the target answered once');
    const verdict = decodeControl(liar.answers[0]!);
    t.false(verdict.success);
    t.regex(verdict.message ?? '', /escape/);
    t.is((await target.request('GET', '/1.0/instances/lied')).status, 404);
    t.false(existsSync(volumeDir(target, 'lied')));
    t.false(existsSync(path.join(path.dirname(volumeDir(target, 'lied')), 'escape')));
  } finally {
    liar.close();
  }
});

test.serial('a source presenting another certificate than the one given is not trusted with the secrets', async (t) => {
  const liar = await headerPeer('127.0.17.5', { fs: FsType.RSYNC });
  try {
    const res = await target.request('POST', '/1.0/instances', {
      name: 'impostor', source: {
        type: 'migration', mode: 'pull', operation: liar.operation,
        certificate: readFileSync(path.join(source.dir, 'server.crt'), 'utf8'), secrets: { control: 'control', fs: 'fs' },
      },
    });
    const done = await target.request('GET', `${res.json.operation}/wait?timeout=30`);
    t.is(done.json.metadata.status, 'Failure');
    t.regex(done.json.metadata.err, /reach the migration source/);
    t.is(liar.answers.length, 0);
    t.is((await target.request('GET', '/1.0/instances/impostor')).status, 404);
  } finally {
    liar.close();
  }
});

test.serial('kill -9 of the target mid-transfer: after its restart there is no instance, volume or staging', async (t) => {
  await lxcOk({ is: () => {} }, source.socket, 'init', 'bb', 'big2');
  const dd = spawn('dd', ['if=/dev/urandom', `of=${path.join(volumeDir(source, 'big2'), 'rootfs', 'big')}`, 'bs=1M', 'count=300', 'status=none']);
  await new Promise((resolve) => dd.on('exit', resolve));
  // A snapshot: staging beside the volume exists while the main tree is still to come.
  await lxcOk({ is: () => {} }, source.socket, 'snapshot', 'big2', 'snap');
  const copy = remoteLxc('copy', 'r1:big2', 'r2:big2');
  const containers = path.dirname(volumeDir(target, 'big2'));
  const started = () => readdirSync(containers).some((n) => n.startsWith('.migrating-'));
  // A snapshot of 300 MB is copied first: on a loaded machine that alone can take half a minute.
  for (let i = 0; i < 2400 && !started(); i++) await new Promise((r) => setTimeout(r, 50));
  t.true(started(), 'the transfer started');
  target.child.kill('SIGKILL');
  t.not((await copy).status, 0, 'the copy fails');
  target = await startDaemon({ dir: target.dir, plugins: 'full' });
  t.is((await target.request('GET', '/1.0/instances/big2')).status, 404);
  t.false(existsSync(volumeDir(target, 'big2')), 'no half-written volume');
  t.false(readdirSync(containers).some((n) => n.startsWith('.migrating-')), 'no staging left');
  t.deepEqual(rsyncsUnder(target.dir), [], 'no receiving rsync outlived its daemon');
  // The source is untouched, and its lock was given back.
  t.is(JSON.parse(await ok(t, 'query', 'r1:/1.0/instances/big2')).status, 'Stopped');
  await ok(t, 'delete', 'r1:big2');
});

test.serial('a push-mode target whose source never connects fails, and gives the name back', async (t) => {
  const body = { name: 'orphan', source: { type: 'migration', mode: 'push' } };
  const first = await target.request('POST', '/1.0/instances', body);
  t.is(first.status, 202, first.body);
  t.deepEqual(Object.keys(first.json.metadata.metadata).sort(), ['control', 'fs'], 'the secrets, and nothing else, for the client to hand over');
  const done = await target.request('GET', `${first.json.operation}/wait?timeout=30`);
  t.is(done.json.metadata.status, 'Failure');
  const again = await target.request('POST', '/1.0/instances', body);
  t.is(again.status, 202, 'the name is free again');
  await target.request('GET', `${again.json.operation}/wait?timeout=30`);
  t.is((await target.request('GET', '/1.0/instances/orphan')).status, 404);
});

// Last: it kills the source daemon.
test.serial('kill -9 of the source mid-transfer: the target fails the copy and keeps no instance, volume or staging', async (t) => {
  await lxcOk({ is: () => {} }, source.socket, 'init', 'bb', 'big');
  // 300 MB of random data: long enough on loopback to be cut in the middle.
  const bigFile = path.join(volumeDir(source, 'big'), 'rootfs', 'big');
  const dd = spawn('dd', ['if=/dev/urandom', `of=${bigFile}`, 'bs=1M', 'count=300', 'status=none']);
  await new Promise((resolve) => dd.on('exit', resolve));
  const copy = remoteLxc('copy', 'r1:big', 'r2:big');
  const containers = path.dirname(volumeDir(target, 'big'));
  const seen = () => existsSync(path.join(volumeDir(target, 'big'), 'rootfs'));
  for (let i = 0; i < 600 && !seen(); i++) await new Promise((r) => setTimeout(r, 50));
  t.true(seen(), 'the transfer started');
  // The target's operation shows the bytes received so far.
  const progress = await fsProgressOf(target);
  t.regex(progress, /^big: \d+(\.\d+)?[kMG]?B \(/, 'fs_progress while receiving');
  source.child.kill('SIGKILL');
  const res = await copy;
  t.not(res.status, 0, 'the copy fails');
  for (let i = 0; i < 100 && existsSync(volumeDir(target, 'big')); i++) await new Promise((r) => setTimeout(r, 100));
  t.is((await target.request('GET', '/1.0/instances/big')).status, 404);
  t.false(existsSync(volumeDir(target, 'big')), 'no half-written volume');
  t.false(readdirSync(containers).some((n) => n.startsWith('.migrating-')), 'no staging left');
  const ops = (await target.request('GET', '/1.0/operations?recursion=1')).json.metadata;
  t.deepEqual(ops.running ?? [], [], 'no operation left running on the target');
  t.deepEqual(rsyncsUnder(target.dir), [], 'no receiving rsync left behind');
  t.deepEqual(rsyncsUnder(source.dir), [], 'no sending rsync outlived its daemon');
});

