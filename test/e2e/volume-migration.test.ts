/**
 * Custom volume migration between two corral daemons over HTTPS on loopback (`dir` pools), with the
 * real `lxc`: `lxc storage volume copy` in pull, push and relay modes carries the volume's files, its
 * snapshots (each with its own files), config and description; `--volume-only` leaves the snapshots
 * behind; `--refresh` brings only what the target lacks; `lxc storage volume move` across remotes
 * removes the source. A lying source and a source killed mid-transfer leave nothing on the target.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { decodeControl, decodeHeader, FsType } from '../../sdk/lib/migration/index.js';
import { startDaemon, startWithPool, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { RemoteClient } from '../helpers/remotes.js';
import { fsProgressOf, headerPeer, rsyncsUnder } from '../helpers/migration-peer.js';

const PASSWORD = 'vol-migr-43';
const client = new RemoteClient(PASSWORD);
const { lxc: remoteLxc, ok, listen } = client;
let source: Daemon;
let target: Daemon;

/** Where a daemon's `default` dir pool keeps a custom volume's files (default project), or one of its snapshots'. */
function volumeDir(daemon: Daemon, name: string, snapshot?: string): string {
  const pool = path.join(daemon.dir, 'storage-pools', 'default');
  return snapshot ? path.join(pool, 'custom-snapshots', `default_${name}`, snapshot) : path.join(pool, 'custom', `default_${name}`);
}

const marker = (daemon: Daemon, name: string, snapshot?: string) => readFileSync(path.join(volumeDir(daemon, name, snapshot), 'data', 'marker'), 'utf8');
const leftovers = (daemon: Daemon) => readdirSync(path.dirname(volumeDir(daemon, 'x'))).filter((n) => n.includes('..partial-'));
const noop = { is: () => {} };

/** Writes `content` to `data/marker` in the volume on disk (and a file only the first tree has, which later trees must not keep). */
function writeMarker(daemon: Daemon, name: string, content: string): void {
  const dir = path.join(volumeDir(daemon, name), 'data');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'marker'), content);
  if (content === 'one') writeFileSync(path.join(dir, 'only-in-one'), 'x');
}

test.before(async () => {
  [source, target] = await Promise.all([startWithPool({ plugins: 'full' }), startWithPool({ plugins: 'full' })]);
  const [u1, u2] = await Promise.all([listen(source, '127.0.43.1'), listen(target, '127.0.43.2')]);
  for (const [name, url] of [['r1', u1], ['r2', u2]] as const) {
    const res = await remoteLxc('remote', 'add', name, url, '--password', PASSWORD, '--accept-certificate');
    if (res.status !== 0) throw new Error(`remote add ${name}: ${res.stderr}`);
  }
  // v1: two snapshots, each with its own content, and the volume's own after them.
  await ok(noop, 'storage', 'volume', 'create', 'r1:default', 'v1', 'user.colour=green');
  const described = await source.request('PUT', '/1.0/storage-pools/default/volumes/custom/v1', { description: 'carried along', config: { 'user.colour': 'green' } });
  if (described.status !== 200) throw new Error(`describing v1: ${described.body}`);
  for (const [content, snapshot] of [['one', 's1'], ['two', 's2'], ['three', undefined]] as const) {
    writeMarker(source, 'v1', content);
    if (snapshot) await ok(noop, 'storage', 'volume', 'snapshot', 'r1:default', 'v1', snapshot);
  }
});

test.after.always(async () => {
  await stopDaemons();
  client.remove();
});

/** The volume `name` on r2 as copied from v1: files of the volume and of each snapshot, records, config. */
async function sameAsV1(t: any, name: string, snapshots = ['s1', 's2']): Promise<void> {
  t.is(marker(target, name), 'three');
  t.false(existsSync(path.join(volumeDir(target, name), 'data', 'only-in-one')), 'a file of an older tree is not kept');
  const names = JSON.parse(await ok(t, 'query', `r2:/1.0/storage-pools/default/volumes/custom/${name}/snapshots?recursion=1`)).map((s: any) => s.name);
  t.deepEqual(names, snapshots);
  if (snapshots.includes('s1')) {
    t.is(marker(target, name, 's1'), 'one');
    t.true(existsSync(path.join(volumeDir(target, name, 's1'), 'data', 'only-in-one')));
    t.is(marker(target, name, 's2'), 'two');
    t.false(existsSync(path.join(volumeDir(target, name, 's2'), 'data', 'only-in-one')));
    const original = JSON.parse(await ok(t, 'query', 'r1:/1.0/storage-pools/default/volumes/custom/v1/snapshots/s1'));
    const copied = JSON.parse(await ok(t, 'query', `r2:/1.0/storage-pools/default/volumes/custom/${name}/snapshots/s1`));
    t.is(copied.created_at.slice(0, 19), original.created_at.slice(0, 19), 'the snapshot keeps its creation time');
    t.is(copied.config['user.colour'], 'green', 'the snapshot keeps its config');
    t.is(copied.description, 'carried along', 'a received snapshot takes the volume\'s description, as the reference gives it');
  }
  const vol = JSON.parse(await ok(t, 'query', `r2:/1.0/storage-pools/default/volumes/custom/${name}`));
  t.is(vol.config['user.colour'], 'green');
  t.is(vol.description, 'carried along');
  t.is(vol.content_type, 'filesystem');
  t.deepEqual(leftovers(target), [], 'no scratch volume left');
  // The source is untouched.
  t.is(marker(source, 'v1'), 'three');
}

test.serial('lxc storage volume copy r1:default/v1 r2:default/v1 (pull; storage_api_remote_volume_handling, storage_api_remote_volume_snapshots) carries files, snapshots, config and description', async (t) => {
  await ok(t, 'storage', 'volume', 'copy', 'r1:default/v1', 'r2:default/v1');
  await sameAsV1(t, 'v1');
});

test.serial('lxc storage volume copy --volume-only leaves the snapshots behind', async (t) => {
  await ok(t, 'storage', 'volume', 'copy', 'r1:default/v1', 'r2:default/vo', '--volume-only');
  await sameAsV1(t, 'vo', []);
  t.false(existsSync(volumeDir(target, 'vo', 's1')));
});

test.serial('lxc storage volume copy --mode push: the source connects to the target operation', async (t) => {
  await ok(t, 'storage', 'volume', 'copy', 'r1:default/v1', 'r2:default/vp', '--mode', 'push');
  await sameAsV1(t, 'vp');
});

test.serial('lxc storage volume copy --mode relay: the client relays between the two operations', async (t) => {
  await ok(t, 'storage', 'volume', 'copy', 'r1:default/v1', 'r2:default/vr', '--mode', 'relay');
  await sameAsV1(t, 'vr');
});

test.serial('lxc storage volume copy --target-project: the copy lands in the target server\'s project that holds its own volumes', async (t) => {
  await ok(t, 'project', 'create', 'r2:hvolp', '-c', 'features.storage.volumes=true', '-c', 'features.images=false', '-c', 'features.profiles=false');
  try {
    await ok(t, 'storage', 'volume', 'copy', 'r1:default/v1', 'r2:default/vproj', '--target-project', 'hvolp');
    const pool = path.join(target.dir, 'storage-pools', 'default');
    t.is(readFileSync(path.join(pool, 'custom', 'hvolp_vproj', 'data', 'marker'), 'utf8'), 'three');
    t.is(readFileSync(path.join(pool, 'custom-snapshots', 'hvolp_vproj', 's1', 'data', 'marker'), 'utf8'), 'one');
    t.is((await target.request('GET', '/1.0/storage-pools/default/volumes/custom/vproj?project=hvolp')).status, 200);
    t.is((await target.request('GET', '/1.0/storage-pools/default/volumes/custom/vproj')).status, 404, 'not in the default project');
  } finally {
    await remoteLxc('storage', 'volume', 'delete', 'r2:default', 'vproj', '--project', 'hvolp');
    await remoteLxc('project', 'delete', 'r2:hvolp');
  }
});

test.serial('lxc storage volume copy --refresh brings the new snapshot and the changed files and keeps the target\'s own; a second copy without it is refused', async (t) => {
  const again = await remoteLxc('storage', 'volume', 'copy', 'r1:default/v1', 'r2:default/v1');
  t.not(again.status, 0);
  t.regex(again.stderr, /already exists/);
  // The target's own snapshot stays (a departure: the reference removes it; decision 0043).
  await ok(t, 'storage', 'volume', 'snapshot', 'r2:default', 'v1', 'mine');
  writeMarker(source, 'v1', 'four');
  await ok(t, 'storage', 'volume', 'snapshot', 'r1:default', 'v1', 's3');
  await ok(t, 'storage', 'volume', 'copy', 'r1:default/v1', 'r2:default/v1', '--refresh');
  t.is(marker(target, 'v1'), 'four');
  t.is(marker(target, 'v1', 's3'), 'four');
  t.is(marker(target, 'v1', 's1'), 'one', 'a snapshot the target had is left as it was');
  const names = JSON.parse(await ok(t, 'query', 'r2:/1.0/storage-pools/default/volumes/custom/v1/snapshots')).map((u: string) => u.split('/').pop());
  t.deepEqual(names.sort(), ['mine', 's1', 's2', 's3']);
  t.is(marker(target, 'v1', 'mine'), 'three');
  // Back to what the later tests expect.
  await ok(t, 'storage', 'volume', 'delete', 'r1:default', 'v1/s3');
  writeMarker(source, 'v1', 'three');
});

test.serial('onto a btrfs pool and back: snapshots become subvolume snapshots with their files', async (t) => {
  await ok(t, 'storage', 'create', 'r2:bt', 'btrfs', 'size=1GiB');
  try {
    await ok(t, 'storage', 'volume', 'copy', 'r1:default/v1', 'r2:bt/vb');
    const root = path.join(target.dir, 'storage-pools', 'bt');
    // btrfs names a default-project volume by its name alone.
    const file = (...parts: string[]) => readFileSync(path.join(root, ...parts, 'data', 'marker'), 'utf8');
    t.is(file('custom', 'vb'), 'three');
    t.is(file('custom-snapshots', 'vb', 's1'), 'one');
    t.is(file('custom-snapshots', 'vb', 's2'), 'two');
    t.false(existsSync(path.join(root, 'custom-snapshots', 'vb', 's2', 'data', 'only-in-one')));
    t.deepEqual(readdirSync(path.join(root, 'custom')).filter((n) => n.includes('..partial-')), [], 'no scratch volume left');
    // From btrfs to dir: the trees of the subvolume snapshots go the same way.
    await ok(t, 'storage', 'volume', 'copy', 'r2:bt/vb', 'r1:default/vback');
    t.is(marker(source, 'vback'), 'three');
    t.is(marker(source, 'vback', 's1'), 'one');
    t.is(marker(source, 'vback', 's2'), 'two');
    await ok(t, 'storage', 'volume', 'delete', 'r1:default', 'vback');
  } finally {
    await remoteLxc('storage', 'volume', 'delete', 'r2:bt', 'vb');
    await remoteLxc('storage', 'delete', 'r2:bt');
  }
});

test.serial('lxc storage volume move r1:default/v1 r2:default/vm moves it across remotes: the source is gone', async (t) => {
  await ok(t, 'storage', 'volume', 'copy', 'r1:default/v1', 'r1:default/vmove');
  await ok(t, 'storage', 'volume', 'move', 'r1:default/vmove', 'r2:default/vm');
  t.is(marker(target, 'vm'), 'three');
  t.is(marker(target, 'vm', 's2'), 'two');
  t.is((await source.request('GET', '/1.0/storage-pools/default/volumes/custom/vmove')).status, 404);
  t.false(existsSync(volumeDir(source, 'vmove')));
});

test.serial('bad migration sources and targets are refused with a 400 before anything starts', async (t) => {
  const cert = readFileSync(path.join(source.dir, 'server.crt'), 'utf8');
  const base = { type: 'migration', mode: 'pull', operation: 'https://127.0.43.1:1/1.0/operations/x', certificate: cert, secrets: { control: 'a', fs: 'b' } };
  for (const [sourceField, pattern] of [
    [{ ...base, mode: 'relay' }, /mode "relay"/],
    [{ ...base, operation: 'http://127.0.43.1/1.0/operations/x' }, /https URL/],
    [{ ...base, secrets: { control: 'a' } }, /"control" and "fs"/],
    [{ ...base, certificate: 'nonsense' }, /certificate/],
    [{ ...base, certificate: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n' }, /certificate/],
  ] as const) {
    const res = await target.request('POST', '/1.0/storage-pools/default/volumes/custom', { name: 'bad', type: 'custom', source: sourceField });
    t.is(res.status, 400, res.body);
    t.regex(res.json.error, pattern);
  }
  const block = await target.request('POST', '/1.0/storage-pools/default/volumes/custom', { name: 'bad', type: 'custom', content_type: 'block', source: base });
  t.is(block.status, 400, block.body);
  const taken = await target.request('POST', '/1.0/storage-pools/default/volumes/custom', { name: 'v1', type: 'custom', source: base });
  t.is(taken.status, 409, taken.body);
  const badTarget = await source.request('POST', '/1.0/storage-pools/default/volumes/custom/v1', { migration: true, target: { operation: 'https://127.0.43.2:1/1.0/operations/x' } });
  t.is(badTarget.status, 400, badTarget.body);
  t.regex(badTarget.json.error, /certificate/);
  t.is((await target.request('GET', '/1.0/storage-pools/default/volumes/custom/bad')).status, 404);
});

test.serial('a source that lies in its header (a snapshot named "a/b", or "..") gets a failure on control, and nothing is made', async (t) => {
  for (const [lie, pattern] of [[['a/b'], /invalid snapshot "a\/b"/], [['ok', '..'], /invalid snapshot "\.\."/]] as const) {
    const liar = await headerPeer('127.0.43.5', { fs: FsType.RSYNC, snapshotNames: [...lie] });
    try {
      const res = await target.request('POST', '/1.0/storage-pools/default/volumes/custom', {
        name: 'lied', type: 'custom', source: { type: 'migration', mode: 'pull', operation: liar.operation, certificate: liar.cert, secrets: { control: 'control', fs: 'fs' } },
      });
      t.is(res.status, 202, res.body);
      const done = await target.request('GET', `${res.json.operation}/wait?timeout=30`);
      t.is(done.json.metadata.status, 'Failure');
      t.regex(done.json.metadata.err, pattern);
      t.is(liar.answers.length, 1, 'the target answered once');
      const verdict = decodeControl(liar.answers[0]!);
      t.false(verdict.success);
      t.is((await target.request('GET', '/1.0/storage-pools/default/volumes/custom/lied')).status, 404);
      t.false(existsSync(volumeDir(target, 'lied')));
      t.deepEqual(leftovers(target), []);
      t.false(existsSync(path.join(path.dirname(volumeDir(target, 'x')), 'b')));
    } finally {
      liar.close();
    }
  }
});

test.serial('a volume being sent is held: its delete and its snapshots\' delete are refused while the target stays silent, and goes through once the send ended', async (t) => {
  const silent = await headerPeer('127.0.43.5');
  try {
    const res = await source.request('POST', '/1.0/storage-pools/default/volumes/custom/v1', {
      migration: true, target: { operation: silent.operation, certificate: silent.cert, secrets: { control: 'control', fs: 'fs' } },
    });
    t.is(res.status, 202, res.body);
    for (let i = 0; i < 200 && !silent.answers.length; i++) await new Promise((r) => setTimeout(r, 50));
    // The offer: the snapshots by name, each with the volume's config as it was when taken.
    const offer = decodeHeader(silent.answers[0]!);
    t.deepEqual(offer.snapshotNames, ['s1', 's2']);
    t.deepEqual(offer.snapshots?.[0]?.localConfig, [{ key: 'user.colour', value: 'green' }]);
    const del = await source.request('DELETE', '/1.0/storage-pools/default/volumes/custom/v1');
    t.is(del.status, 409, del.body);
    t.regex(del.json.error, /being migrated/);
    // Nor do its snapshots change (the operation fails with the same answer).
    const snapDel = await source.request('DELETE', '/1.0/storage-pools/default/volumes/custom/v1/snapshots/s1');
    const snapDone = snapDel.json?.operation ? (await source.request('GET', `${snapDel.json.operation}/wait?timeout=30`)).json.metadata : { err: snapDel.json?.error };
    t.regex(snapDone.err ?? '', /being migrated/);
    t.true(existsSync(volumeDir(source, 'v1', 's1')));
    silent.close();
    const done = await source.request('GET', `${res.json.operation}/wait?timeout=30`);
    t.is(done.json.metadata.status, 'Failure');
  } finally {
    silent.close();
  }
  const del = await source.request('DELETE', '/1.0/storage-pools/default/volumes/custom/v1');
  t.is(del.status, 200, del.body);
});

test.serial('kill -9 of the target mid-transfer: after its restart there is no volume or scratch, and the source volume is free again', async (t) => {
  await ok(t, 'storage', 'volume', 'create', 'r1:default', 'big2');
  const dd = spawn('dd', ['if=/dev/urandom', `of=${path.join(volumeDir(source, 'big2'), 'big')}`, 'bs=1M', 'count=300', 'status=none']);
  await new Promise((resolve) => dd.on('exit', resolve));
  await ok(t, 'storage', 'volume', 'snapshot', 'r1:default', 'big2', 'snap');
  const copy = remoteLxc('storage', 'volume', 'copy', 'r1:default/big2', 'r2:default/big2');
  const started = () => leftovers(target).length > 0;
  for (let i = 0; i < 600 && !started(); i++) await new Promise((r) => setTimeout(r, 50));
  t.true(started(), 'the transfer started');
  target.child.kill('SIGKILL');
  t.not((await copy).status, 0, 'the copy fails');
  target = await startDaemon({ dir: target.dir, plugins: 'full' });
  t.is((await target.request('GET', '/1.0/storage-pools/default/volumes/custom/big2')).status, 404);
  t.false(existsSync(volumeDir(target, 'big2')), 'no half-written volume');
  t.deepEqual(leftovers(target), [], 'no scratch volume left');
  const snapshots = path.join(target.dir, 'storage-pools', 'default', 'custom-snapshots');
  t.deepEqual(readdirSync(snapshots).filter((n) => n.includes('big2')), [], 'no snapshots of the scratch volume left');
  t.deepEqual(rsyncsUnder(target.dir), [], 'no receiving rsync outlived its daemon');
  // The source saw its peer go, and gave the volume back.
  const del = await source.request('DELETE', '/1.0/storage-pools/default/volumes/custom/big2');
  t.is(del.status, 200, del.body);
});

// Last: it kills the source daemon.
test.serial('kill -9 of the source mid-transfer leaves no volume, scratch or rsync on the target', async (t) => {
  await ok(t, 'storage', 'volume', 'create', 'r1:default', 'big');
  const dd = spawn('dd', ['if=/dev/urandom', `of=${path.join(volumeDir(source, 'big'), 'big')}`, 'bs=1M', 'count=300', 'status=none']);
  await new Promise((resolve) => dd.on('exit', resolve));
  const copy = remoteLxc('storage', 'volume', 'copy', 'r1:default/big', 'r2:default/big');
  const started = () => leftovers(target).length > 0;
  for (let i = 0; i < 600 && !started(); i++) await new Promise((r) => setTimeout(r, 50));
  t.true(started(), 'the transfer started');
  const progress = await fsProgressOf(target);
  t.regex(progress, /^big: \d+(\.\d+)?[kMG]?B \(/, 'fs_progress while receiving');
  source.child.kill('SIGKILL');
  const res = await copy;
  t.not(res.status, 0, 'the copy fails');
  for (let i = 0; i < 100 && leftovers(target).length; i++) await new Promise((r) => setTimeout(r, 100));
  t.is((await target.request('GET', '/1.0/storage-pools/default/volumes/custom/big')).status, 404);
  t.false(existsSync(volumeDir(target, 'big')), 'no half-written volume');
  t.deepEqual(leftovers(target), [], 'no scratch volume left');
  const ops = (await target.request('GET', '/1.0/operations?recursion=1')).json.metadata;
  t.deepEqual(ops.running ?? [], [], 'no operation left running on the target');
  t.deepEqual(rsyncsUnder(target.dir), [], 'no receiving rsync left behind');
  t.deepEqual(rsyncsUnder(source.dir), [], 'no sending rsync outlived its daemon');
});
