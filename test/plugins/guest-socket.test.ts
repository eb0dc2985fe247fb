/**
 * The guest socket /dev/lxd/sock on real containers of a real daemon (full set), asked from
 * inside by a static client (test/fixtures/devlxd-client) pushed with `lxc file push` and run with
 * `lxc exec`: an instance's own config, devices and meta-data; never a neighbour's; events of its
 * own changes only; image export gated by security.devlxd.images; security.devlxd=false; a
 * daemon killed and started again; and the same questions asked of the reference daemon.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { killContainers, startDaemon, startWithPool, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { callAndWait, importImage } from '../helpers/api.js';
import { claimsNamed } from '../helpers/claims.js';
import { hasLxc, lxc, lxcEnv } from '../helpers/clients.js';
import { serialUnless } from '../helpers/needs.js';
import { askInside, buildDevlxdClient, devlxdClientUnavailable, launchWithClient, parseGet, removeDevlxdClient } from '../helpers/devlxd-client.js';
import { referenceUnavailable, startReference, type ReferenceDaemon } from '../helpers/reference-daemon.js';

const missing = devlxdClientUnavailable() ?? (hasLxc() ? undefined : 'the lxc client is not installed');
const serial = serialUnless(missing);
const withReference = serialUnless(missing ?? referenceUnavailable());

let d: Daemon;
let image: BusyboxImage;
let client: string;
let fingerprint: string;

const call = (method: string, url: string, body?: unknown) => callAndWait(d, method, url, body);

const launch = (socket: string, name: string, config: Record<string, string> = {}) => launchWithClient(socket, client, name, config);

const ask = askInside;

async function setKey(name: string, key: string, value: string): Promise<void> {
  const r = await lxc(d.socket, 'config', 'set', name, key, value);
  if (r.status !== 0) throw new Error(`lxc config set: ${r.stderr}`);
}

/** A websocket client inside `name`, listening for `secs`; resolves once it is connected. */
async function listenInside(socket: string, name: string, query: string, secs: number): Promise<{ lines: () => string[]; done: Promise<void> }> {
  const child = spawn('lxc', ['exec', name, '--', '/devlxd-client', 'events', query, String(secs)], { env: lxcEnv(socket), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c));
  const done = new Promise<void>((resolve) => child.on('close', () => resolve()));
  const killer = setTimeout(() => child.kill('SIGKILL'), (secs + 30) * 1000);
  void done.then(() => clearTimeout(killer));
  await waitFor(() => out.startsWith('ready\n') || child.exitCode !== null, 20000, 'the events client to connect');
  if (!out.startsWith('ready\n')) throw new Error(`events client: ${out}`);
  return { lines: () => out.split('\n').slice(1).filter(Boolean), done };
}

test.before(async () => {
  if (missing) return;
  client = buildDevlxdClient();
  image = buildBusyboxImage('gzip');
  d = await startWithPool({ plugins: 'full' });
  fingerprint = await importImage(d, image.unified, 'bb');
  await launch(d.socket, 'u3g1', { 'user.mine': 'one', 'user.meta-data': 'mykey: myvalue', 'limits.processes': '500' });
  await launch(d.socket, 'u3g2', { 'user.secret': 'neighbour-secret' });
});

test.afterEach.always((t) => {
  if (!t.passed && d) t.log(d.output().slice(-3000));
});

test.after.always(async () => {
  await stopDaemons();
  if (image) rmSync(image.dir, { recursive: true, force: true });
  removeDevlxdClient();
});

serial('own config, meta-data and devices from inside; the neighbour\'s user.secret never shows', async (t) => {
  const root = await ask(d.socket, 'u3g1', '/');
  t.is(root.status, 200);
  t.deepEqual(JSON.parse(root.body), ['/1.0']);
  const info = await ask(d.socket, 'u3g1', '/1.0');
  t.is(info.status, 200);
  const meta = JSON.parse(info.body);
  t.is(meta.api_version, '1.0');
  t.is(meta.instance_type, 'container');
  t.is(meta.location, 'none');
  const list = await ask(d.socket, 'u3g1', '/1.0/config');
  t.deepEqual(JSON.parse(list.body), ['/1.0/config/user.meta-data', '/1.0/config/user.mine']);
  t.deepEqual(await ask(d.socket, 'u3g1', '/1.0/config/user.mine'), { status: 200, body: 'one' });
  t.is((await ask(d.socket, 'u3g1', '/1.0/config/limits.processes')).status, 403, 'keys other than user.* and cloud-init.* stay hidden');
  t.is((await ask(d.socket, 'u3g1', '/1.0/config/user.absent')).status, 404);
  t.is((await ask(d.socket, 'u3g1', '/1.0/config/user.secret')).status, 404, 'the neighbour\'s key is not this instance\'s');
  const metaData = await ask(d.socket, 'u3g1', '/1.0/meta-data');
  const cloudId = (await d.request('GET', '/1.0/instances/u3g1')).json.metadata.config['volatile.cloud-init.instance-id'];
  t.regex(cloudId, /^[0-9a-f-]{36}$/);
  t.is(metaData.body, `#cloud-config\ninstance-id: ${cloudId}\nlocal-hostname: u3g1\nmykey: myvalue`);
  const devices = JSON.parse((await ask(d.socket, 'u3g1', '/1.0/devices')).body);
  const expanded = (await d.request('GET', '/1.0/instances/u3g1')).json.metadata.expanded_devices;
  t.deepEqual(devices, expanded);
  for (const p of ['/1.0', '/1.0/config', '/1.0/meta-data', '/1.0/devices', '/1.0/config/user.secret']) {
    t.false((await ask(d.socket, 'u3g1', p)).body.includes('neighbour-secret'), p);
  }
  t.deepEqual(await ask(d.socket, 'u3g2', '/1.0/config/user.secret'), { status: 200, body: 'neighbour-secret' }, 'each instance sees its own');
  t.is((await ask(d.socket, 'u3g1', '/1.0/nothing')).status, 404);
  t.is((await ask(d.socket, 'u3g1', '/1.0', 'POST')).status, 200, 'the method does not matter, as with the reference');
  // Any user inside may connect (the socket is world-writable).
  const asNobody = await lxc(d.socket, 'exec', 'u3g1', '--user', '65534', '--', '/devlxd-client', 'get', '/1.0');
  t.is(parseGet(asNobody.stdout).status, 200, asNobody.stderr);
});

serial('config and device events of the instance itself, never a neighbour\'s (devlxd_events)', async (t) => {
  const events = await listenInside(d.socket, 'u3g1', 'type=config,device', 8);
  await setKey('u3g1', 'user.color', 'blue');
  await setKey('u3g2', 'user.secret', 'changed-secret');
  await setKey('u3g2', 'user.other', 'x');
  t.is((await call('PATCH', '/1.0/instances/u3g1', { devices: { extra: { type: 'none' } } })).status, 200);
  await waitFor(() => events.lines().length >= 2, 10000, 'two events inside');
  await events.done;
  const got = events.lines().map((l) => JSON.parse(l));
  t.is(got.length, 2, JSON.stringify(got));
  t.is(got[0].type, 'config');
  t.deepEqual(got[0].metadata, { key: 'user.color', old_value: '', value: 'blue' });
  t.truthy(got[0].timestamp);
  t.is(got[1].type, 'device');
  t.deepEqual(got[1].metadata, { action: 'added', name: 'extra', config: { type: 'none' } });
  t.false(JSON.stringify(got).includes('secret'));
  const onlyConfig = await listenInside(d.socket, 'u3g1', 'type=config', 4);
  t.is((await call('PATCH', '/1.0/instances/u3g1', { devices: {} })).status, 200);
  await setKey('u3g1', 'user.color', 'red');
  await onlyConfig.done;
  t.deepEqual(onlyConfig.lines().map((l) => JSON.parse(l).metadata), [{ key: 'user.color', old_value: 'blue', value: 'red' }]);
  // A profile's user key reaches the guests of the instances using it.
  const fromProfile = await listenInside(d.socket, 'u3g1', 'type=config', 4);
  t.is((await lxc(d.socket, 'profile', 'set', 'default', 'user.fromprofile', 'p')).status, 0);
  await fromProfile.done;
  t.is((await lxc(d.socket, 'profile', 'unset', 'default', 'user.fromprofile')).status, 0);
  t.deepEqual(fromProfile.lines().map((l) => JSON.parse(l).metadata), [{ key: 'user.fromprofile', old_value: '', value: 'p' }]);
  const bad = await lxc(d.socket, 'exec', 'u3g1', '--', '/devlxd-client', 'events', 'type=lifecycle', '3');
  t.is(bad.stdout.trim(), '400');
});

serial('image export from inside only with security.devlxd.images (devlxd_images)', async (t) => {
  t.is((await ask(d.socket, 'u3g1', `/1.0/images/${fingerprint}/export`)).status, 403);
  await setKey('u3g1', 'security.devlxd.images', 'true');
  const r = await lxc(d.socket, 'exec', 'u3g1', '--', '/bin/sh', '-c', `/devlxd-client get /1.0/images/${fingerprint}/export > /tmp/img && head -n1 /tmp/img && tail -c +5 /tmp/img | sha256sum`);
  const [status, sum] = r.stdout.split('\n');
  t.is(status, '200');
  t.is(sum!.split(' ')[0], fingerprint, 'the bytes are the image file (its sha256 is the fingerprint)');
  t.is(sum!.split(' ')[0], createHash('sha256').update(readFileSync(image.unified)).digest('hex'));
  t.is((await ask(d.socket, 'u3g1', '/1.0/images/0123abcd/export')).status, 404);
  // A split image comes as two parts (metadata, rootfs) whose bytes hash to its fingerprint.
  const split = await lxc(d.socket, 'image', 'import', image.metadata, image.rootfs, '--alias', 'bbsplit');
  t.is(split.status, 0, split.stderr);
  const splitFp: string = (await d.request('GET', '/1.0/images/aliases/bbsplit')).json.metadata.target;
  const got = await lxc(d.socket, 'exec', 'u3g1', '--', '/bin/sh', '-c', `/devlxd-client get /1.0/images/${splitFp}/export > /tmp/split && head -n1 /tmp/split`);
  t.is(got.stdout.trim(), '200');
  const pulled = path.join(mkdtempSync(path.join(tmpdir(), 'corral-u3-pull-')), 'split');
  try {
    t.is((await lxc(d.socket, 'file', 'pull', 'u3g1/tmp/split', pulled)).status, 0);
    const body = readFileSync(pulled).subarray(4);
    const boundary = body.subarray(0, body.indexOf('\r\n')).toString();
    const parts: Buffer[] = [];
    let at = 0;
    for (;;) {
      const start = body.indexOf('\r\n\r\n', at) + 4;
      const end = body.indexOf(`\r\n${boundary}`, start);
      if (start < 4 || end < 0) break;
      parts.push(body.subarray(start, end));
      at = end + 2;
    }
    t.is(parts.length, 2);
    t.deepEqual(parts[0], readFileSync(image.metadata));
    t.deepEqual(parts[1], readFileSync(image.rootfs));
    t.is(createHash('sha256').update(parts[0]!).update(parts[1]!).digest('hex'), splitFp);
  } finally {
    rmSync(path.dirname(pulled), { recursive: true, force: true });
  }
  await setKey('u3g1', 'security.devlxd.images', 'false');
  t.is((await ask(d.socket, 'u3g1', `/1.0/images/${fingerprint}/export`)).status, 403);
});

serial('security.devlxd=false: no /dev/lxd inside; turned off on a running container, the socket closes (restrict_devlxd)', async (t) => {
  const bad = await lxc(d.socket, 'config', 'set', 'u3g1', 'security.devlxd', 'maybe');
  t.not(bad.status, 0);
  t.regex(bad.stderr, /security\.devlxd/);
  await launch(d.socket, 'u3g3', { 'security.devlxd': 'false' });
  const r = await lxc(d.socket, 'exec', 'u3g3', '--', '/bin/sh', '-c', 'ls -d /dev/lxd || echo absent');
  t.true(r.stdout.includes('absent'), r.stdout);
  await setKey('u3g3', 'security.devlxd', 'true');
  t.is((await lxc(d.socket, 'restart', 'u3g3', '--force')).status, 0);
  t.is((await ask(d.socket, 'u3g3', '/1.0')).status, 200, 'on at the next start');
  await setKey('u3g3', 'security.devlxd', 'false');
  await waitFor(async () => (await ask(d.socket, 'u3g3', '/1.0')).status === -1, 10000, 'the socket to close');
  t.is((await ask(d.socket, 'u3g3', '/1.0')).status, -1);
  t.is((await lxc(d.socket, 'delete', '--force', 'u3g3')).status, 0);
});

serial('a stopped container\'s socket is gone; a daemon killed and started again answers inside the running one', async (t) => {
  const dirOf = (name: string) => path.join(d.dir, 'devlxd', `default_${name}`);
  t.is((await lxc(d.socket, 'stop', '--force', 'u3g2')).status, 0);
  await waitFor(() => { try { readFileSync(path.join(dirOf('u3g2'), 'sock')); return false; } catch (e) { return (e as NodeJS.ErrnoException).code === 'ENOENT'; } }, 10000, 'the socket removed');
  t.is((await lxc(d.socket, 'start', 'u3g2')).status, 0);
  t.deepEqual(await ask(d.socket, 'u3g2', '/1.0/config/user.secret'), { status: 200, body: 'changed-secret' }, 'started again, it has its socket again');
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-u3-devlxd-'));
  let d2: Daemon | undefined;
  try {
    d2 = await startWithPool({ dir, plugins: 'full' });
    await importImage(d2, image.unified, 'bb');
    await launch(d2.socket, 'u3rs', { 'user.k': 'v' });
    t.is((await ask(d2.socket, 'u3rs', '/1.0/config/user.k')).status, 200);
    // One in another project too: the sockets found again are named by project and instance.
    const inProject = (...args: string[]) => lxc(d2!.socket, '--project', 'u3p', ...args);
    t.is((await lxc(d2.socket, 'project', 'create', 'u3p', '-c', 'features.images=false', '-c', 'features.profiles=false')).status, 0);
    t.is((await inProject('launch', 'bb', 'u3rs', '-c', 'user.k=p')).status, 0);
    t.is((await inProject('file', 'push', client, 'u3rs/devlxd-client', '--mode', '0755')).status, 0);
    const askInProject = async () => {
      const r = await inProject('exec', 'u3rs', '--', '/devlxd-client', 'get', '/1.0/config/user.k');
      return r.status === 0 ? parseGet(r.stdout) : { status: -1, body: r.stderr };
    };
    t.deepEqual(await askInProject(), { status: 200, body: 'p' });
    const killed = d2;
    const exited = new Promise((resolve) => killed.child.once('exit', resolve));
    killed.child.kill('SIGKILL');
    await exited;
    d2 = await startDaemon({ plugins: 'full', dir });
    // The API serves first; the running containers' sockets come back right after.
    const restarted = d2;
    await waitFor(async () => (await ask(restarted.socket, 'u3rs', '/1.0/config/user.k').catch(() => undefined))?.status === 200, 10_000, 'the guest socket back');
    t.deepEqual(await ask(d2.socket, 'u3rs', '/1.0/config/user.k'), { status: 200, body: 'v' }, 'the new daemon listens in the directory the container has mounted');
    await waitFor(async () => (await askInProject()).status === 200, 10_000, 'the guest socket in the other project back');
    t.deepEqual(await askInProject(), { status: 200, body: 'p' }, 'the container of the other project is answered as itself');
    t.is((await inProject('delete', '--force', 'u3rs')).status, 0);
    t.is((await lxc(d2.socket, 'delete', '--force', 'u3rs')).status, 0);
  } finally {
    await d2?.stop();
    killContainers(dir);
    rmSync(dir, { recursive: true, force: true });
  }
});

withReference('the same questions from inside a reference container get the same statuses, fields and events (devlxd_events)', async (t) => {
  let ref: ReferenceDaemon | undefined;
  try {
    ref = await startReference();
    const up = await ref.call('POST', '/1.0/images', readFileSync(image.unified), { 'Content-Type': 'application/octet-stream' });
    t.is(up.op?.status, 'Success', up.op?.err);
    await ref.request('POST', '/1.0/images/aliases', { name: 'bb', target: up.op.metadata.fingerprint });
    await launch(ref.socket, 'u3ref', { 'user.mine': 'one', 'user.meta-data': 'mykey: myvalue' });
    await launch(d.socket, 'u3cmp', { 'user.mine': 'one', 'user.meta-data': 'mykey: myvalue' });
    for (const [p, method] of [['/', 'GET'], ['/1.0', 'GET'], ['/1.0/config', 'GET'], ['/1.0/config/user.mine', 'GET'], ['/1.0/config/user.absent', 'GET'],
      ['/1.0/config/limits.cpu', 'GET'], ['/1.0/meta-data', 'GET'], ['/1.0/nothing', 'GET'], ['/1.0', 'POST'], ['/1.0/devices', 'DELETE'], ['/1.0/', 'GET'], ['/1.0/config/', 'GET'], ['/1.0/meta-data/x', 'GET'], [`/1.0/images/${fingerprint}/export`, 'GET']] as const) {
      const theirs = await ask(ref.socket, 'u3ref', p, method);
      const ours = await ask(d.socket, 'u3cmp', p, method);
      t.log(method, p, JSON.stringify(theirs), JSON.stringify(ours));
      t.is(ours.status, theirs.status, `${method} ${p}: ${theirs.body}`);
      if (theirs.status === 200 && theirs.body.startsWith('{')) t.deepEqual(Object.keys(JSON.parse(ours.body)).sort(), Object.keys(JSON.parse(theirs.body)).sort(), p);
      if (theirs.status === 200 && (p === '/' || p === '/1.0/config/user.mine')) t.is(ours.body, theirs.body, p);
      // The reference lists keys in no fixed order.
      if (p === '/1.0/config') t.deepEqual(JSON.parse(ours.body).sort(), JSON.parse(theirs.body).sort());
      const neutral = (body: string, name: string) => body.replaceAll(name, 'X').replace(/instance-id: [0-9a-f-]{36}/, 'instance-id: ID');
      if (p === '/1.0/meta-data') t.is(neutral(ours.body, 'u3cmp'), neutral(theirs.body, 'u3ref'));
      if (p === '/1.0') t.deepEqual(JSON.parse(ours.body), JSON.parse(theirs.body));
    }
    // Events: the same changes on both sides, heard from inside.
    const [theirEvents, ourEvents] = await Promise.all([listenInside(ref.socket, 'u3ref', 'type=config,device', 8), listenInside(d.socket, 'u3cmp', 'type=config,device', 8)]);
    for (const [socket, name] of [[ref.socket, 'u3ref'], [d.socket, 'u3cmp']] as const) {
      t.is((await lxc(socket, 'config', 'set', name, 'user.color', 'blue')).status, 0);
      t.is((await lxc(socket, 'config', 'device', 'add', name, 'extra', 'none')).status, 0);
    }
    await Promise.all([theirEvents.done, ourEvents.done]);
    const shape = (lines: string[]) => lines.map((l) => JSON.parse(l)).map((e) => ({ keys: Object.keys(e).sort(), type: e.type, metadata: e.metadata }));
    t.log('reference events', theirEvents.lines());
    t.log('corral events', ourEvents.lines());
    t.deepEqual(shape(ourEvents.lines()), shape(theirEvents.lines()));
    await lxc(d.socket, 'delete', '--force', 'u3cmp');
  } finally {
    await ref?.stop();
  }
});

serial('every extension the guest-socket plugin claims is named by a test and advertised', async (t) => {
  const { claims, unnamed } = claimsNamed('guest-socket');
  t.true(claims.length > 0);
  t.deepEqual(unnamed, []);
  const advertised: string[] = (await d.request('GET', '/1.0')).json.metadata.api_extensions;
  t.deepEqual(claims.filter((c) => !advertised.includes(c)), []);
});
