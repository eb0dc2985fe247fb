/** The instances family through the API of a real daemon (edge set): bad input, bulk state, crash recovery. */
import test from 'ava';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { startDaemon, startWithPool, waitFor, killContainers, type Daemon } from '../helpers/daemon.js';
import { startWithImage, stopImageDaemons, type ImageDaemon } from '../helpers/image-daemon.js';
import { callAndWait, importImage } from '../helpers/api.js';
import { instanceTypeLimits } from '../../plugins/instances/instance-types.js';
import { checkInstanceName } from '../../plugins/instances/names.js';
import { expireLogs } from '../../plugins/instances/logs.js';
import { pidsMaxFile } from '../helpers/cgroup.js';

let d: ImageDaemon;

const call = (method: string, url: string, body?: unknown, daemon: Daemon = d) => callAndWait(daemon, method, url, body);

test.before(async () => {
  d = await startWithImage();
});

test.after.always(stopImageDaemons);

test('instance names follow host name rules', (t) => {
  for (const bad of ['', 'a/b', 'a b', '-lead', '1abc', 'x'.repeat(64), 'café', 'trail-']) {
    t.throws(() => checkInstanceName(bad), undefined, bad);
  }
  t.is(checkInstanceName('web-01'), 'web-01');
});

test('instance types expand to limits', (t) => {
  t.deepEqual(instanceTypeLimits('c2-m4'), { 'limits.cpu': '2', 'limits.memory': '4096MiB' });
  t.deepEqual(instanceTypeLimits('aws:t2.micro'), { 'limits.cpu': '1', 'limits.memory': '1024MiB' });
  t.throws(() => instanceTypeLimits('huge.bogus'));
});

test.serial('bad input gets a clear error and creates nothing', async (t) => {
  const cases: [unknown, number, RegExp][] = [
    [{ name: 'a/b', source: { type: 'image', alias: 'bb' } }, 400, /name/i],
    [{ name: 'has space', source: { type: 'image', alias: 'bb' } }, 400, /name/i],
    [{ name: '-dash', source: { type: 'image', alias: 'bb' } }, 400, /name/i],
    [{ name: 'x'.repeat(64), source: { type: 'image', alias: 'bb' } }, 400, /long/i],
    [{ name: 'héllo', source: { type: 'image', alias: 'bb' } }, 400, /name/i],
    [{ name: 'k1', source: { type: 'image', alias: 'bb' }, config: { 'bogus.key': '1' } }, 400, /bogus\.key/],
    [{ name: 'k2', source: { type: 'image', alias: 'bb' }, config: { 'limits.memory': 'lots' } }, 400, /limits\.memory/],
    [{ name: 'k3', source: { type: 'image', alias: 'bb' }, devices: { x: { type: 'warp-drive' } } }, 400, /warp-drive/],
    [{ name: 'k4', source: { type: 'image', alias: 'bb' }, devices: { x: { type: 'gpu' } } }, 400, /not enabled/],
    [{ name: 'k5', source: { type: 'image', alias: 'missing' } }, 404, /not found/i],
    [{ name: 'k6', source: { type: 'image', alias: 'bb' }, profiles: ['nope'] }, 400, /nope/],
    [{ name: 'k7', source: { type: 'teleport' } }, 400, /teleport/],
    [{ name: 'k8', source: { type: 'image', alias: 'bb' }, instance_type: 'huge.bogus' }, 400, /instance type/i],
  ];
  for (const [body, status, message] of cases) {
    const res = await call('POST', '/1.0/instances', body);
    t.is(res.status, status, JSON.stringify(body));
    t.is(res.json.type, 'error');
    t.regex(res.json.error, message);
  }
  t.deepEqual((await call('GET', '/1.0/instances')).json.metadata, []);
  t.deepEqual(readdirSync(path.join(d.dir, 'storage-pools', 'default', 'containers')), []);
});

test.serial('duplicate names, double starts, deleting running or protected instances (container_protection_delete)', async (t) => {
  const created = await call('POST', '/1.0/instances', { name: 'dup', source: { type: 'image', alias: 'bb' }, instance_type: 'c1-m1' });
  t.is(created.op.status, 'Success');
  const info = (await call('GET', '/1.0/instances/dup')).json.metadata;
  t.is(info.config['limits.memory'], '1024MiB');
  t.is((await call('POST', '/1.0/instances', { name: 'dup', source: { type: 'image', alias: 'bb' } })).status, 409);
  t.is((await call('PUT', '/1.0/instances/dup/state', { action: 'start' })).op.status, 'Success');
  const again = await call('PUT', '/1.0/instances/dup/state', { action: 'start' });
  t.is(again.op.status, 'Failure');
  t.regex(again.op.err, /already running/);
  const running = await call('DELETE', '/1.0/instances/dup');
  t.is(running.status, 400);
  t.regex(running.json.error, /running/);
  t.is((await call('PUT', '/1.0/instances/dup/state', { action: 'stop', force: true })).op.status, 'Success');
  t.is((await call('PATCH', '/1.0/instances/dup', { config: { 'security.protection.delete': 'true' } })).status, 200);
  const protectedDelete = await call('DELETE', '/1.0/instances/dup');
  t.is(protectedDelete.op.status, 'Failure');
  t.regex(protectedDelete.op.err, /protected/);
  t.is((await call('PATCH', '/1.0/instances/dup', { config: { 'security.protection.delete': 'false' } })).status, 200);
  t.is((await call('DELETE', '/1.0/instances/dup')).op.status, 'Success');
  t.is((await call('GET', '/1.0/instances/dup')).status, 404);
});

test.serial('bulk state change starts and stops every instance; aliases list by type (instance_bulk_state_change); recursion=2 with state (container_full)', async (t) => {
  for (const name of ['b1', 'b2']) await call('POST', '/1.0/instances', { name, source: { type: 'image', alias: 'bb' } });
  t.is((await call('PUT', '/1.0/instances', { state: { action: 'start' } })).op.status, 'Success');
  const listed = (await call('GET', '/1.0/instances?recursion=1')).json.metadata;
  t.deepEqual(listed.map((i: any) => i.status), ['Running', 'Running']);
  // container_full: recursion=2 carries the live state, as `lxc list` asks for it.
  const full = (await call('GET', '/1.0/instances?recursion=2')).json.metadata;
  t.true(full.every((i: any) => i.state.pid > 0 && i.state.processes >= 1 && i.state.network.lo.type === 'loopback'));
  t.deepEqual((await call('GET', '/1.0/containers')).json.metadata, ['/1.0/containers/b1', '/1.0/containers/b2']);
  t.deepEqual((await call('GET', '/1.0/virtual-machines')).json.metadata, []);
  const filtered = (await call('GET', '/1.0/instances?recursion=1&filter=name+eq+b2')).json.metadata;
  t.deepEqual(filtered.map((i: any) => i.name), ['b2']);
  t.is((await call('PUT', '/1.0/instances', { state: { action: 'stop', force: true } })).op.status, 'Success');
  for (const name of ['b1', 'b2']) t.is((await call('DELETE', `/1.0/instances/${name}`)).op.status, 'Success');
});

test.serial('copy within the server gets fresh volatile keys', async (t) => {
  await call('POST', '/1.0/instances', { name: 'orig', source: { type: 'image', alias: 'bb' }, config: { 'user.a': '1' } });
  const copy = await call('POST', '/1.0/instances', { name: 'copy1', source: { type: 'copy', source: 'orig' } });
  t.is(copy.op.status, 'Success', copy.op.err);
  const a = (await call('GET', '/1.0/instances/orig')).json.metadata;
  const b = (await call('GET', '/1.0/instances/copy1')).json.metadata;
  t.is(b.config['user.a'], '1');
  t.not(a.config['volatile.uuid'], b.config['volatile.uuid']);
  t.true(existsSync(path.join(d.dir, 'storage-pools', 'default', 'containers', 'copy1', 'rootfs', 'bin', 'busybox')));
  for (const name of ['orig', 'copy1']) await call('DELETE', `/1.0/instances/${name}`);
});

test.serial('kill -9 mid-flight: after a restart every instance is whole or gone, running ones are adopted', async (t) => {
  const d2 = await startWithPool();
  try {
    await importImage(d2, d.image.unified, 'bb');
    await call('POST', '/1.0/instances', { name: 'keep', source: { type: 'image', alias: 'bb' } }, d2);
    await call('PUT', '/1.0/instances/keep/state', { action: 'start' }, d2);
    const pid = (await call('GET', '/1.0/instances/keep/state', undefined, d2)).json.metadata.pid;
    await call('POST', '/1.0/instances', { name: 'gone', source: { type: 'image', alias: 'bb' } }, d2);
    // Fire creates, a start and a delete, then kill the daemon before they can finish.
    const inflight = [
      ...Array.from({ length: 6 }, (_, i) => d2.request('POST', '/1.0/instances', { name: `f${i}`, source: { type: 'image', alias: 'bb' } }).catch(() => undefined)),
      d2.request('DELETE', '/1.0/instances/gone').catch(() => undefined),
    ];
    await new Promise((r) => setTimeout(r, 40));
    d2.child.kill('SIGKILL');
    await Promise.all(inflight);
    await waitFor(() => d2.child.exitCode !== null || d2.child.signalCode !== null, 5000, 'the daemon to die');
    const d3 = await startDaemon({ plugins: 'edge', dir: d2.dir });
    try {
      const listed = (await call('GET', '/1.0/instances?recursion=1', undefined, d3)).json.metadata;
      const names = listed.map((i: any) => i.name);
      const volumes = readdirSync(path.join(d2.dir, 'storage-pools', 'default', 'containers')).sort();
      t.deepEqual(volumes, [...names].sort(), 'a volume for every record and a record for every volume');
      for (const name of names) t.true(existsSync(path.join(d2.dir, 'storage-pools', 'default', 'containers', name, 'rootfs', 'bin', 'busybox')), name);
      const keep = listed.find((i: any) => i.name === 'keep');
      t.is(keep.status, 'Running');
      t.is((await call('GET', '/1.0/instances/keep/state', undefined, d3)).json.metadata.pid, pid, 'adopted, not restarted');
      const exec = await call('POST', '/1.0/instances/keep/exec', { command: ['true'], 'wait-for-websocket': false }, d3);
      t.is(exec.op.metadata.return, 0);
      const lxcDirs = existsSync(path.join(d2.dir, 'containers')) ? readdirSync(path.join(d2.dir, 'containers')) : [];
      for (const dir of lxcDirs) t.true(names.some((n: string) => dir === n || dir.endsWith(`_${n}`)), `stray lxc dir ${dir}`);
    } finally {
      await d3.stop();
    }
  } finally {
    killContainers(d2.dir);
    rmSync(d2.dir, { recursive: true, force: true });
  }
});

test.serial('exec with record-output keeps the output under logs (container_exec_recording)', async (t) => {
  await call('POST', '/1.0/instances', { name: 'rec', source: { type: 'image', alias: 'bb' } });
  await call('PUT', '/1.0/instances/rec/state', { action: 'start' });
  const exec = await call('POST', '/1.0/instances/rec/exec', { command: ['sh', '-c', 'echo recorded; exit 7'], 'record-output': true, 'wait-for-websocket': false, interactive: false });
  t.is(exec.op.metadata.return, 7);
  const stdoutUrl = exec.op.metadata.output['1'];
  t.regex(stdoutUrl, /^\/1\.0\/instances\/rec\/logs\/exec_[\w-]+\.stdout$/);
  const res = await d.request('GET', stdoutUrl);
  t.is(res.body, 'recorded\n');
  // The logs list serves the records, lxc.log and the console log; only exec records may go.
  const logs: string[] = (await call('GET', '/1.0/instances/rec/logs')).json.metadata;
  t.true(logs.includes(stdoutUrl));
  t.true(logs.includes('/1.0/instances/rec/logs/lxc.log'));
  t.is((await call('GET', '/1.0/containers/rec/logs')).json.metadata[0].split('/')[2], 'instances', 'the alias answers with /1.0/instances URLs, as the reference does');
  t.is((await call('DELETE', '/1.0/instances/rec/logs/lxc.log')).status, 400);
  t.is((await call('GET', '/1.0/instances/rec/logs/passwd')).status, 400);
  t.is((await call('GET', '/1.0/instances/rec/logs/..%2F..%2Fcorral.db')).status, 400);
  t.is((await call('GET', '/1.0/instances/rec/logs/exec_missing.stdout')).status, 404);
  t.is((await call('DELETE', stdoutUrl)).status, 200);
  t.is((await d.request('GET', stdoutUrl)).status, 404);
  t.false((await call('GET', '/1.0/instances/rec/logs')).json.metadata.includes(stdoutUrl));
  await call('PUT', '/1.0/instances/rec/state', { action: 'stop', force: true });
  await call('DELETE', '/1.0/instances/rec');
  t.is((await call('GET', '/1.0/instances/rec/logs')).status, 404);
});

test.serial('snapshot and backup lists answer for existing instances only (container_backup, as lxc info needs)', async (t) => {
  await call('POST', '/1.0/instances', { name: 'lists', source: { type: 'image', alias: 'bb' } });
  t.deepEqual((await call('GET', '/1.0/instances/lists/snapshots')).json.metadata, []);
  t.deepEqual((await call('GET', '/1.0/instances/lists/backups?recursion=1')).json.metadata, []);
  t.true((await call('GET', '/1.0')).json.metadata.api_extensions.includes('container_backup'));
  t.is((await call('GET', '/1.0/instances/nothere/backups')).status, 404);
  t.is((await call('GET', '/1.0/instances/nothere/snapshots')).status, 404);
  await call('DELETE', '/1.0/instances/lists');
});

test('log expiry removes files untouched for two days and keeps lxc.conf', async (t) => {
  const { mkdtempSync, mkdirSync, writeFileSync, utimesSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const root = mkdtempSync(path.join(tmpdir(), 'corral-logs-'));
  try {
    mkdirSync(path.join(root, 'c1'));
    const old = (Date.now() - 3 * 24 * 3600_000) / 1000;
    for (const f of ['lxc.log', 'lxc.conf', 'exec_a.stdout', 'console.log', 'other.txt']) {
      writeFileSync(path.join(root, 'c1', f), 'x');
      utimesSync(path.join(root, 'c1', f), old, old);
    }
    writeFileSync(path.join(root, 'c1', 'exec_b.stdout'), 'fresh');
    t.is(await expireLogs(root), 3);
    t.deepEqual(readdirSync(path.join(root, 'c1')).sort(), ['exec_b.stdout', 'lxc.conf', 'other.txt']);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test.serial('disk devices: readonly, shift (container_disk_shift) and propagation (container_mount_propagation)', async (t) => {
  const { mkdtempSync, writeFileSync, chmodSync } = await import('node:fs');
  const { execFileSync } = await import('node:child_process');
  const { tmpdir } = await import('node:os');
  const host = mkdtempSync(path.join(tmpdir(), 'corral-disk-'));
  // mkdtemp makes it 0700: the container's unmapped root could not even enter it.
  chmodSync(host, 0o755);
  writeFileSync(path.join(host, 'owned-by-root'), 'x');
  // A shared mount on the host: the container's copy of it follows it (master:N) unless made private.
  const sharedSource = mkdtempSync(path.join(tmpdir(), 'corral-shared-'));
  execFileSync('mount', ['-t', 'tmpfs', 'tmpfs', sharedSource]);
  execFileSync('mount', ['--make-shared', sharedSource]);
  try {
    const created = await call('POST', '/1.0/instances', {
      name: 'disks',
      source: { type: 'image', alias: 'bb' },
      devices: {
        plain: { type: 'disk', source: host, path: '/mnt/plain', readonly: 'true' },
        shifted: { type: 'disk', source: host, path: '/mnt/shifted', shift: 'true' },
        follower: { type: 'disk', source: sharedSource, path: '/mnt/follower' },
        private: { type: 'disk', source: sharedSource, path: '/mnt/private', propagation: 'private' },
      },
    });
    t.is(created.op.status, 'Success', created.op.err);
    const started = await call('PUT', '/1.0/instances/disks/state', { action: 'start' });
    t.is(started.op.status, 'Success', started.op.err);
    const run = async (command: string) => {
      const exec = await call('POST', '/1.0/instances/disks/exec', { command: ['sh', '-c', command], 'record-output': true, 'wait-for-websocket': false });
      return { code: exec.op.metadata.return as number, out: (await d.request('GET', exec.op.metadata.output['1'])).body.trim() };
    };
    // Host root (uid 0) is outside an unprivileged container's map: nobody, unless the mount is shifted.
    t.is((await run('stat -c %u /mnt/plain/owned-by-root')).out, '65534');
    t.is((await run('stat -c %u /mnt/shifted/owned-by-root')).out, '0');
    t.not((await run('touch /mnt/plain/new')).code, 0, 'readonly');
    t.regex((await run('grep " /mnt/follower " /proc/self/mountinfo')).out, /master:\d+/);
    t.notRegex((await run('grep " /mnt/private " /proc/self/mountinfo')).out, /master:/);
    const bad = await call('POST', '/1.0/instances', { name: 'bad-disk', source: { type: 'image', alias: 'bb' }, devices: { x: { type: 'disk', source: host, path: '/x', propagation: 'sideways' } } });
    t.is(bad.status, 400);
    t.regex(bad.json.error, /propagation/);
  } finally {
    await call('PUT', '/1.0/instances/disks/state', { action: 'stop', force: true });
    await call('DELETE', '/1.0/instances/disks');
    execFileSync('umount', [sharedSource]);
    rmSync(sharedSource, { recursive: true, force: true });
    rmSync(host, { recursive: true, force: true });
  }
});

test.serial('a profile edit changes the limits of running instances that use it, or is refused whole', async (t) => {
  t.is((await call('POST', '/1.0/profiles', { name: 'capped', config: { 'limits.processes': '100' } })).status, 200);
  await call('POST', '/1.0/instances', { name: 'capped1', profiles: ['default', 'capped'], source: { type: 'image', alias: 'bb' } });
  await call('POST', '/1.0/instances', { name: 'capped2', profiles: ['default', 'capped'], config: { 'limits.processes': '300' }, source: { type: 'image', alias: 'bb' } });
  for (const n of ['capped1', 'capped2']) await call('PUT', `/1.0/instances/${n}/state`, { action: 'start' });
  const pid = async (n: string) => (await call('GET', `/1.0/instances/${n}/state`)).json.metadata.pid as number;
  const limit = async (n: string) => readFileSync(pidsMaxFile(await pid(n)), 'utf8').trim();
  t.is(await limit('capped1'), '100');
  t.is((await call('PATCH', '/1.0/profiles/capped', { config: { 'limits.processes': '200' } })).status, 200);
  t.is(await limit('capped1'), '200', 'applied live');
  t.is(await limit('capped2'), '300', 'the instance\'s own value still wins');
  // A value the kernel refuses for the running container: nothing changes anywhere.
  const refused = await call('PUT', '/1.0/profiles/capped', { config: { 'limits.processes': '200', 'limits.memory': '1' } });
  t.is(refused.status, 400);
  t.is(await limit('capped1'), '200');
  t.is((await call('GET', '/1.0/profiles/capped')).json.metadata.config['limits.memory'], undefined);
  for (const n of ['capped1', 'capped2']) {
    await call('PUT', `/1.0/instances/${n}/state`, { action: 'stop', force: true });
    await call('DELETE', `/1.0/instances/${n}`);
  }
  await call('DELETE', '/1.0/profiles/capped');
});
