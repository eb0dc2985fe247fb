/**
 * Instance snapshots, restores, copies and pool moves through the API of a real daemon on a dir
 * pool: files written into a container are checked after each step.
 */
import test from 'ava';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { startDaemon, startWithPool, stopDaemons, waitFor, killContainers, type Daemon } from '../helpers/daemon.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { callAndWait, importImage, mustSucceed } from '../helpers/api.js';

let d: Daemon;
let image: BusyboxImage;
let otherPoolDir: string;

const call = (method: string, url: string, body?: unknown) => callAndWait(d, method, url, body);
const fileUrl = (name: string, p: string) => `/1.0/instances/${name}/files?path=${encodeURIComponent(p)}`;
const write = (name: string, p: string, text: string) => d.request('POST', fileUrl(name, p), text, { 'x-lxd-type': 'file', 'content-type': 'application/octet-stream' });
const read = async (name: string, p: string) => {
  const res = await d.request('GET', fileUrl(name, p));
  return res.status === 200 ? res.body : `(${res.status})`;
};
const ok = (t: any, res: { status: number; op?: any; body: string }, what: string) => {
  t.true(res.status < 300, `${what}: ${res.status} ${res.body}`);
  if (res.op) t.is(res.op.status, 'Success', `${what}: ${res.op.err}`);
};

async function makeInstance(t: any, name: string, content = 'one') {
  ok(t, await call('POST', '/1.0/instances', { name, source: { type: 'image', alias: 'bb' } }), `create ${name}`);
  t.is((await write(name, '/root/marker', content)).status, 200);
}

const snapshotNames = async (name: string) => ((await d.request('GET', `/1.0/instances/${name}/snapshots`)).json.metadata as string[]).map((u) => decodeURIComponent(u.split('/').pop()!));

test.before(async () => {
  image = buildBusyboxImage('gzip');
  d = await startWithPool();
  await importImage(d, image.unified, 'bb');
  otherPoolDir = mkdtempSync(path.join(tmpdir(), 'corral-pool2-'));
  rmSync(otherPoolDir, { recursive: true });
  const res = await d.request('POST', '/1.0/storage-pools', { name: 'second', driver: 'dir', config: { source: otherPoolDir } });
  if (res.status !== 200) throw new Error(res.body);
});

test.after.always(async () => {
  killContainers(d?.dir);
  await stopDaemons();
  rmSync(image.dir, { recursive: true, force: true });
  rmSync(otherPoolDir, { recursive: true, force: true });
});

test.serial('snapshot create, list, show, rename, delete (snapshot_disk_usage, snapshot_expiry_creation)', async (t) => {
  await makeInstance(t, 's1');
  ok(t, await call('POST', '/1.0/instances/s1/snapshots', { name: 'first' }), 'snapshot');
  ok(t, await call('POST', '/1.0/instances/s1/snapshots', {}), 'auto-named snapshot');
  ok(t, await call('POST', '/1.0/instances/s1/snapshots', { name: 'dated', expires_at: '2099-01-02T03:04:05Z' }), 'snapshot with expiry');
  t.deepEqual(await snapshotNames('s1'), ['first', 'snap0', 'dated']);

  const shown = (await d.request('GET', '/1.0/instances/s1/snapshots/first')).json.metadata;
  t.is(shown.name, 'first');
  t.is(shown.stateful, false);
  t.is(shown.expires_at, '0001-01-01T00:00:00Z');
  t.true(shown.size > 1_000_000, `size counts the busybox binary: ${shown.size}`);
  t.is(shown.expanded_devices.root.pool, 'default');
  t.is((await d.request('GET', '/1.0/instances/s1/snapshots/dated')).json.metadata.expires_at, '2099-01-02T03:04:05Z');

  const listed = (await d.request('GET', '/1.0/instances/s1/snapshots?recursion=1')).json.metadata;
  t.deepEqual(listed.map((s: any) => s.name), ['first', 'snap0', 'dated']);

  // Edit expiry, then disable it with the zero time.
  ok(t, await call('PUT', '/1.0/instances/s1/snapshots/first', { expires_at: '2098-05-05T00:00:00Z' }), 'edit expiry');
  t.is((await d.request('GET', '/1.0/instances/s1/snapshots/first')).json.metadata.expires_at, '2098-05-05T00:00:00Z');
  ok(t, await call('PUT', '/1.0/instances/s1/snapshots/first', { expires_at: '0001-01-01T00:00:00Z' }), 'clear expiry');
  t.is((await d.request('GET', '/1.0/instances/s1/snapshots/first')).json.metadata.expires_at, '0001-01-01T00:00:00Z');

  ok(t, await call('POST', '/1.0/instances/s1/snapshots/snap0', { name: 'renamed' }), 'rename');
  t.deepEqual(await snapshotNames('s1'), ['first', 'renamed', 'dated']);
  ok(t, await call('DELETE', '/1.0/instances/s1/snapshots/dated'), 'delete');
  t.deepEqual(await snapshotNames('s1'), ['first', 'renamed']);
  t.false(existsSync(path.join(d.dir, 'storage-pools/default/containers-snapshots/s1/dated')));
  t.true(existsSync(path.join(d.dir, 'storage-pools/default/containers-snapshots/s1/renamed/rootfs/root/marker')));

  // recursion=2 shows the snapshots (lxc list counts them).
  const full = (await d.request('GET', '/1.0/instances?recursion=2')).json.metadata.find((i: any) => i.name === 's1');
  t.is(full.snapshots.length, 2);
});

test.serial('bad snapshot input is a clear 400 and creates nothing', async (t) => {
  await makeInstance(t, 'bad1');
  ok(t, await call('POST', '/1.0/instances/bad1/snapshots', { name: 'taken' }), 'snapshot');
  const cases: [string, string, unknown, RegExp][] = [
    ['POST', '/1.0/instances/bad1/snapshots', { name: 'a/b' }, /snapshot name/i],
    ['POST', '/1.0/instances/bad1/snapshots', { name: 'taken' }, /already exists/],
    ['POST', '/1.0/instances/bad1/snapshots', { name: 'x', stateful: true }, /CRIU/],
    ['POST', '/1.0/instances/bad1/snapshots', { name: 'y', expires_at: 'soon' }, /expires_at/],
    ['POST', '/1.0/instances/bad1/snapshots/taken', { name: '' }, /name/],
    ['POST', '/1.0/instances/bad1/snapshots/taken', { name: 'c/d' }, /snapshot name/i],
    ['PUT', '/1.0/instances/bad1/snapshots/taken', { expires_at: 'garbage' }, /expires_at/],
    ['PUT', '/1.0/instances/bad1', { restore: 'nope' }, /not found/i],
  ];
  for (const [method, url, body, message] of cases) {
    const res = await d.request(method, url, body);
    t.true(res.status === 400 || res.status === 404, `${method} ${url} ${JSON.stringify(body)}: ${res.status}`);
    t.regex(res.json?.error ?? '', message, `${method} ${url} ${JSON.stringify(body)}`);
  }
  for (const [key, value] of [['snapshots.schedule', 'every tuesday'], ['snapshots.schedule', '61 * * * *'], ['snapshots.expiry', '3 days']]) {
    const res = await d.request('PATCH', '/1.0/instances/bad1', { config: { [key]: value } });
    t.is(res.status, 400, `${key}=${value}`);
    t.regex(res.json.error, new RegExp(key.replace('.', '\\.')));
  }
  t.deepEqual(await snapshotNames('bad1'), ['taken']);
  t.deepEqual(readdirSync(path.join(d.dir, 'storage-pools/default/containers-snapshots/bad1')), ['taken']);
  t.is((await d.request('GET', '/1.0/instances/bad1/snapshots/missing')).status, 404);
});

test.serial('snapshots.pattern and snapshots.expiry shape new snapshots (snapshot_expiry)', async (t) => {
  await makeInstance(t, 'pat1');
  ok(t, await call('PATCH', '/1.0/instances/pat1', { config: { 'snapshots.pattern': 'daily-%d', 'snapshots.expiry': '2d 3H' } }), 'set keys');
  const before = Date.now();
  ok(t, await call('POST', '/1.0/instances/pat1/snapshots', {}), 'snapshot');
  ok(t, await call('POST', '/1.0/instances/pat1/snapshots', {}), 'snapshot');
  t.deepEqual(await snapshotNames('pat1'), ['daily-0', 'daily-1']);
  const expires = Date.parse((await d.request('GET', '/1.0/instances/pat1/snapshots/daily-0')).json.metadata.expires_at);
  const expected = before + (2 * 24 + 3) * 3600_000;
  t.true(Math.abs(expires - expected) < 60_000, `expiry ${new Date(expires).toISOString()}`);
});

test.serial('restore brings back files and config, and restarts a running instance', async (t) => {
  await makeInstance(t, 'r1', 'before');
  ok(t, await call('PATCH', '/1.0/instances/r1', { config: { 'user.tag': 'old' } }), 'tag');
  ok(t, await call('POST', '/1.0/instances/r1/snapshots', { name: 'base' }), 'snapshot');
  t.is((await write('r1', '/root/marker', 'after')).status, 200);
  t.is((await write('r1', '/root/extra', 'x')).status, 200);
  ok(t, await call('PATCH', '/1.0/instances/r1', { config: { 'user.tag': 'new' } }), 'retag');
  const uuid = (await d.request('GET', '/1.0/instances/r1')).json.metadata.config['volatile.uuid'];

  const events: any[] = [];
  const ws = await d.websocket('/1.0/events?type=lifecycle');
  ws.on('message', (m) => events.push(JSON.parse(String(m))));
  ok(t, await call('PUT', '/1.0/instances/r1', { restore: 'base' }), 'restore');
  t.is(await read('r1', '/root/marker'), 'before');
  t.is(await read('r1', '/root/extra'), '(404)');
  const after = (await d.request('GET', '/1.0/instances/r1')).json.metadata;
  t.is(after.config['user.tag'], 'old');
  t.is(after.config['volatile.uuid'], uuid, 'volatile keys stay the instance\'s');
  await waitFor(() => events.some((e) => e.metadata.action === 'instance-restored'), 5000, 'instance-restored event');
  t.deepEqual(events.find((e) => e.metadata.action === 'instance-restored').metadata.context, { snapshot: 'base' });

  // A running instance is stopped for the restore and runs again afterwards.
  ok(t, await call('PUT', '/1.0/instances/r1/state', { action: 'start' }), 'start');
  t.is((await write('r1', '/root/marker', 'running')).status, 200);
  ok(t, await call('PUT', '/1.0/instances/r1', { restore: 'base' }), 'restore running');
  t.is((await d.request('GET', '/1.0/instances/r1')).json.metadata.status, 'Running');
  t.is(await read('r1', '/root/marker'), 'before');
  ok(t, await call('PUT', '/1.0/instances/r1/state', { action: 'stop', force: true }), 'stop');
  ws.close();
});

test.serial('copies: plain with snapshots, instance_only (container_only_migration), from a snapshot, to another pool (container_local_cross_pool_handling)', async (t) => {
  await makeInstance(t, 'src', 'v1');
  ok(t, await call('POST', '/1.0/instances/src/snapshots', { name: 'one' }), 'snapshot');
  t.is((await write('src', '/root/marker', 'v2')).status, 200);
  const srcConfig = (await d.request('GET', '/1.0/instances/src')).json.metadata.config;

  ok(t, await call('POST', '/1.0/instances', { name: 'cp-all', source: { type: 'copy', source: 'src' } }), 'copy');
  t.is(await read('cp-all', '/root/marker'), 'v2');
  t.deepEqual(await snapshotNames('cp-all'), ['one']);
  t.true(existsSync(path.join(d.dir, 'storage-pools/default/containers-snapshots/cp-all/one/rootfs/root/marker')));
  const copied = (await d.request('GET', '/1.0/instances/cp-all')).json.metadata.config;
  t.not(copied['volatile.uuid'], srcConfig['volatile.uuid'], 'a copy gets a fresh uuid');
  t.is(copied['volatile.base_image'], srcConfig['volatile.base_image']);

  ok(t, await call('POST', '/1.0/instances', { name: 'cp-only', source: { type: 'copy', source: 'src', instance_only: true } }), 'instance_only copy');
  t.deepEqual(await snapshotNames('cp-only'), []);
  ok(t, await call('POST', '/1.0/instances', { name: 'cp-only2', source: { type: 'copy', source: 'src', container_only: true } }), 'container_only copy');
  t.deepEqual(await snapshotNames('cp-only2'), []);

  ok(t, await call('POST', '/1.0/instances', { name: 'cp-snap', source: { type: 'copy', source: 'src/one' } }), 'copy from snapshot');
  t.is(await read('cp-snap', '/root/marker'), 'v1');
  t.deepEqual(await snapshotNames('cp-snap'), []);

  ok(t, await call('POST', '/1.0/instances', {
    name: 'cp-pool', source: { type: 'copy', source: 'src' }, devices: { root: { type: 'disk', path: '/', pool: 'second' } },
  }), 'copy to the second pool');
  t.is(await read('cp-pool', '/root/marker'), 'v2');
  t.true(existsSync(path.join(otherPoolDir, 'containers/cp-pool/rootfs/root/marker')));
  t.true(existsSync(path.join(otherPoolDir, 'containers-snapshots/cp-pool/one/rootfs/root/marker')));

  const missing = await d.request('POST', '/1.0/instances', { name: 'cp-x', source: { type: 'copy', source: 'src/nope' } });
  t.is((await d.request('GET', '/1.0/instances/cp-x')).status, 404);
  t.is(missing.status, 404);
  t.is((await d.request('GET', '/1.0/instances/cp-x')).status, 404);
});

test.serial('a running instance copies without its running state (container_stateless_copy)', async (t) => {
  await makeInstance(t, 'live1', 'live');
  ok(t, await call('PUT', '/1.0/instances/live1/state', { action: 'start' }), 'start');
  ok(t, await call('POST', '/1.0/instances', { name: 'live1-copy', source: { type: 'copy', source: 'live1', live: false } }), 'copy with live=false');
  const copy = (await d.request('GET', '/1.0/instances/live1-copy')).json.metadata;
  t.is(copy.status, 'Stopped');
  t.is(await read('live1-copy', '/root/marker'), 'live');
  t.is((await d.request('POST', '/1.0/instances', { name: 'live1-bad', source: { type: 'copy', source: 'live1', live: 'yes' } })).status, 400);
  ok(t, await call('PUT', '/1.0/instances/live1/state', { action: 'stop', force: true }), 'stop');
});

test.serial('refresh copy brings an existing copy up to date (container_incremental_copy)', async (t) => {
  await makeInstance(t, 'rsrc', 'a');
  ok(t, await call('POST', '/1.0/instances', { name: 'rdst', source: { type: 'copy', source: 'rsrc' } }), 'copy');
  t.is((await write('rsrc', '/root/marker', 'b')).status, 200);
  ok(t, await call('POST', '/1.0/instances/rsrc/snapshots', { name: 'later' }), 'snapshot');
  ok(t, await call('POST', '/1.0/instances', { name: 'rdst', source: { type: 'copy', source: 'rsrc', refresh: true } }), 'refresh');
  t.is(await read('rdst', '/root/marker'), 'b');
  t.deepEqual(await snapshotNames('rdst'), ['later']);
  const left = readdirSync(path.join(d.dir, 'storage-pools/default/containers-snapshots/rdst'));
  t.deepEqual(left, ['later'], 'no scratch snapshot is left');
});

test.serial('rename takes snapshots along; delete removes them; pool move (instance_pool_move)', async (t) => {
  await makeInstance(t, 'mv1', 'keep');
  ok(t, await call('POST', '/1.0/instances/mv1/snapshots', { name: 'kept' }), 'snapshot');
  ok(t, await call('POST', '/1.0/instances/mv1', { name: 'mv2' }), 'rename');
  t.deepEqual(await snapshotNames('mv2'), ['kept']);
  t.true(existsSync(path.join(d.dir, 'storage-pools/default/containers-snapshots/mv2/kept')));
  t.false(existsSync(path.join(d.dir, 'storage-pools/default/containers-snapshots/mv1')));

  ok(t, await call('PUT', '/1.0/instances/mv2/state', { action: 'start' }), 'start');
  const running = await d.request('POST', '/1.0/instances/mv2', { name: 'mv2', pool: 'second' });
  t.is(running.status, 400);
  t.regex(running.json.error, /running/);
  ok(t, await call('PUT', '/1.0/instances/mv2/state', { action: 'stop', force: true }), 'stop');
  t.is((await d.request('POST', '/1.0/instances/mv2', { name: 'mv2', pool: 'nowhere' })).status, 404);

  ok(t, await call('POST', '/1.0/instances/mv2', { name: 'mv2', pool: 'second' }), 'move to pool');
  const moved = (await d.request('GET', '/1.0/instances/mv2')).json.metadata;
  t.is(moved.expanded_devices.root.pool, 'second');
  t.is(await read('mv2', '/root/marker'), 'keep');
  t.true(existsSync(path.join(otherPoolDir, 'containers-snapshots/mv2/kept/rootfs/root/marker')));
  t.false(existsSync(path.join(d.dir, 'storage-pools/default/containers/mv2')));
  t.false(existsSync(path.join(d.dir, 'storage-pools/default/containers-snapshots/mv2')));
  ok(t, await call('PUT', '/1.0/instances/mv2/state', { action: 'start' }), 'start on the new pool');
  ok(t, await call('PUT', '/1.0/instances/mv2/state', { action: 'stop', force: true }), 'stop');

  ok(t, await call('DELETE', '/1.0/instances/mv2'), 'delete');
  t.false(existsSync(path.join(otherPoolDir, 'containers-snapshots/mv2')));
  t.is((await d.request('GET', '/1.0/instances/mv2/snapshots')).status, 404);
});

test.serial('20 snapshots in parallel on 20 instances all succeed', async (t) => {
  const names = Array.from({ length: 20 }, (_, i) => `par${i}`);
  await Promise.all(names.map((n) => call('POST', '/1.0/instances', { name: n, source: { type: 'image', alias: 'bb' } })));
  const results = await Promise.all(names.map((n) => call('POST', `/1.0/instances/${n}/snapshots`, { name: 'p' })));
  for (const r of results) ok(t, r, 'parallel snapshot');
  for (const n of names) t.deepEqual(await snapshotNames(n), ['p']);
});

test.serial('a long copy shows fs_progress in its operation (migration_progress)', async (t) => {
  await makeInstance(t, 'heavy');
  execFileSync('dd', ['if=/dev/zero', `of=${path.join(d.dir, 'storage-pools/default/containers/heavy/rootfs/root/blob')}`, 'bs=1M', 'count=1200', 'status=none']);
  const seen: string[] = [];
  const ws = await d.websocket('/1.0/events?type=operation');
  ws.on('message', (m) => {
    const progress = JSON.parse(String(m)).metadata?.metadata?.fs_progress;
    if (progress) seen.push(progress);
  });
  ok(t, await call('POST', '/1.0/instances', { name: 'heavy-copy', source: { type: 'copy', source: 'heavy' } }), 'copy');
  ws.close();
  t.true(seen.length > 0, 'at least one progress update');
  t.regex(seen[0]!, /^rootfs: [\d.]+[kMG]?B \([\d.]+[kMG]?B\/s\)$/);
  ok(t, await call('DELETE', '/1.0/instances/heavy-copy'), 'delete');
  ok(t, await call('DELETE', '/1.0/instances/heavy'), 'delete');
});

test.serial('at boot, snapshot storage without a record is removed, recorded snapshots are kept and closed, whichever instance holds them', async (t) => {
  // Its own directory, which outlives the first daemon.
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-snapshot-sweep-'));
  const d2 = await startWithPool({ dir });
  const snaps = (name: string) => path.join(dir, 'storage-pools/default/containers-snapshots', name);
  try {
    await importImage(d2, image.unified, 'bb');
    for (const name of ['sw1', 'sw2', 'sw3']) await mustSucceed(d2, 'POST', '/1.0/instances', { name, source: { type: 'image', alias: 'bb' } });
    await mustSucceed(d2, 'POST', '/1.0/instances/sw1/snapshots', { name: 'kept' });
    await d2.stop();
    // A crash between a snapshot's storage and its record, for an instance with snapshots and one without;
    // a recorded snapshot left open by an older version (which recorded no directory rules).
    for (const ghost of [path.join(snaps('sw1'), 'ghost'), path.join(snaps('sw2'), 'ghost')]) mkdirSync(path.join(ghost, 'rootfs'), { recursive: true });
    chmodSync(path.join(snaps('sw1'), 'kept'), 0o755);
    rmSync(path.join(dir, 'instance-directory-rules'));
    const d3 = await startDaemon({ plugins: 'edge', dir });
    try {
      t.deepEqual(readdirSync(snaps('sw1')), ['kept']);
      t.deepEqual(existsSync(snaps('sw2')) ? readdirSync(snaps('sw2')) : [], []);
      t.false(existsSync(snaps('sw3')));
      t.is(statSync(path.join(snaps('sw1'), 'kept')).mode & 0o7777, 0o100);
      t.deepEqual(((await d3.request('GET', '/1.0/instances/sw1/snapshots')).json.metadata as string[]).map((u) => u.split('/').pop()), ['kept']);
    } finally {
      await d3.stop();
    }
  } finally {
    killContainers(dir);
    rmSync(dir, { recursive: true, force: true });
  }
});

test.serial('kill -9 during copies and a pool move: after a restart each target is whole or absent', async (t) => {
  const d2 = await startWithPool();
  const pool2 = mkdtempSync(path.join(tmpdir(), 'corral-kill-pool-'));
  rmSync(pool2, { recursive: true });
  try {
    await importImage(d2, image.unified, 'bb');
    t.is((await d2.request('POST', '/1.0/storage-pools', { name: 'p2', driver: 'dir', config: { source: pool2 } })).status, 200);
    for (const name of ['big', 'mover']) {
      await callAndWait(d2, 'POST', '/1.0/instances', { name, source: { type: 'image', alias: 'bb' } });
      // Enough data that copying takes a while.
      execFileSync('dd', ['if=/dev/zero', `of=${path.join(d2.dir, 'storage-pools/default/containers', name, 'rootfs/root/blob')}`, 'bs=1M', 'count=300', 'status=none']);
      await callAndWait(d2, 'POST', `/1.0/instances/${name}/snapshots`, { name: 'one' });
    }
    const inflight = [
      d2.request('POST', '/1.0/instances', { name: 'copy1', source: { type: 'copy', source: 'big' } }).catch(() => undefined),
      d2.request('POST', '/1.0/instances', { name: 'copy2', source: { type: 'copy', source: 'big' }, devices: { root: { type: 'disk', path: '/', pool: 'p2' } } }).catch(() => undefined),
      d2.request('POST', '/1.0/instances/mover', { name: 'mover', pool: 'p2' }).catch(() => undefined),
    ];
    await new Promise((r) => setTimeout(r, 300));
    d2.child.kill('SIGKILL');
    await Promise.all(inflight);
    await waitFor(() => d2.child.exitCode !== null || d2.child.signalCode !== null, 5000, 'the daemon to die');
    const d3 = await startDaemon({ plugins: 'edge', dir: d2.dir });
    try {
      const listed = (await d3.request('GET', '/1.0/instances?recursion=1')).json.metadata;
      if (process.env.DEBUG_KILL) console.log(d3.output().split('\n').filter((l) => /leftover|record|cleanup|error/i.test(l)).join('\n'));
      const pools: Record<string, string> = { default: path.join(d2.dir, 'storage-pools/default'), p2: pool2 };
      for (const [pool, dir] of Object.entries(pools)) {
        const volumes = readdirSync(path.join(dir, 'containers')).sort();
        const expected = listed.filter((i: any) => i.expanded_devices.root.pool === pool).map((i: any) => i.name).sort();
        t.deepEqual(volumes, expected, `pool ${pool}: a volume for every record and a record for every volume`);
        for (const name of volumes) {
          t.is(statSync(path.join(dir, 'containers', name, 'rootfs/root/blob')).size, 300 * 1024 * 1024, `${name} on ${pool} is whole`);
        }
      }
      t.truthy(listed.find((i: any) => i.name === 'mover'), 'the moved instance exists on one pool or the other');
      t.truthy(listed.find((i: any) => i.name === 'big'));
    } finally {
      await d3.stop();
    }
  } finally {
    killContainers(d2.dir);
    rmSync(d2.dir, { recursive: true, force: true });
    rmSync(pool2, { recursive: true, force: true });
  }
});
