/**
 * The instance type comes from the route: /1.0/containers and /1.0/virtual-machines fix it, /1.0/instances
 * takes either. Checked against the reference (LXD 5.0.2) through lxc and raw HTTP over the unix socket.
 */
import test from 'ava';
import { collect, waitFor, type Daemon } from '../helpers/daemon.js';
import { startWithImage, stopImageDaemons } from '../helpers/image-daemon.js';
import { callAndWait } from '../helpers/api.js';
import { lxc } from '../helpers/clients.js';

let d: Daemon;

test.before(async () => {
  d = await startWithImage({ importWith: 'lxc' });
  if ((await lxc(d.socket, 'init', 'bb', 'c1')).status !== 0) throw new Error('lxc init failed');
  if ((await lxc(d.socket, 'snapshot', 'c1', 's0')).status !== 0) throw new Error('lxc snapshot failed');
});

test.after.always(async () => {
  await stopImageDaemons();
});

/** Every route below an instance, with a body that would be accepted for the container through /1.0/instances. */
const UNDER_INSTANCE: [string, string, unknown?][] = [
  ['GET', ''], ['PUT', '', { config: {} }], ['PATCH', '', { config: {} }], ['POST', '', { name: 'renamed' }], ['DELETE', ''],
  ['GET', '/state'], ['PUT', '/state', { action: 'start' }],
  ['POST', '/exec', { command: ['true'], 'wait-for-websocket': false }],
  ['GET', '/console'], ['POST', '/console', {}], ['DELETE', '/console'],
  ['GET', '/files?path=/etc/hostname'], ['POST', '/files?path=/tmp/x', 'x'], ['DELETE', '/files?path=/tmp/x'],
  ['GET', '/snapshots'], ['POST', '/snapshots', { name: 's1' }],
  ['GET', '/snapshots/s0'], ['PUT', '/snapshots/s0', {}], ['PATCH', '/snapshots/s0', {}], ['POST', '/snapshots/s0', { name: 's9' }], ['DELETE', '/snapshots/s0'],
  ['GET', '/backups'], ['POST', '/backups', { name: 'b1' }],
  ['GET', '/backups/b1'], ['POST', '/backups/b1', { name: 'b2' }], ['DELETE', '/backups/b1'], ['GET', '/backups/b1/export'],
  ['GET', '/logs'], ['GET', '/logs/lxc.log'], ['DELETE', '/logs/lxc.log'],
  ['GET', '/metadata'], ['PUT', '/metadata', {}], ['PATCH', '/metadata', {}],
  ['GET', '/metadata/templates'], ['GET', '/metadata/templates?path=x'], ['POST', '/metadata/templates?path=x', 'x'], ['DELETE', '/metadata/templates?path=x'],
];

test.serial('a container is not found under /1.0/virtual-machines, on every route below it and for every verb', async (t) => {
  const before = (await d.request('GET', '/1.0/instances/c1')).json.metadata;
  for (const [method, suffix, body] of UNDER_INSTANCE) {
    const res = await d.request(method, `/1.0/virtual-machines/c1${suffix}`, body);
    t.is(res.status, 404, `${method} /1.0/virtual-machines/c1${suffix}: ${res.body}`);
    t.is(res.json?.error, 'Instance not found', `${method} ${suffix}`);
  }
  // A PUT with a stale If-Match is still a 404 (the type is checked before the ETag).
  t.is((await d.request('PUT', '/1.0/virtual-machines/c1', { config: {} }, { 'If-Match': '"stale"' })).status, 404);
  const after = (await d.request('GET', '/1.0/instances/c1')).json.metadata;
  t.deepEqual(after, before, 'nothing changed, nothing was renamed, started or deleted');
  t.deepEqual((await d.request('GET', '/1.0/instances/c1/snapshots')).json.metadata, ['/1.0/instances/c1/snapshots/s0']);
  // The same routes under /1.0/containers and /1.0/instances find it.
  for (const prefix of ['/1.0/containers', '/1.0/instances']) {
    t.is((await d.request('GET', `${prefix}/c1`)).status, 200, prefix);
    t.is((await d.request('GET', `${prefix}/c1/state`)).json.metadata.status, 'Stopped', prefix);
    t.is((await d.request('GET', `${prefix}/c1/snapshots/s0`)).status, 200, prefix);
  }
});

test.serial('lxc query reaches the typed collections as the reference answers them', async (t) => {
  const vm = await lxc(d.socket, 'query', '/1.0/virtual-machines/c1');
  t.not(vm.status, 0);
  t.regex(vm.stderr, /Instance not found/);
  const ct = await lxc(d.socket, 'query', '/1.0/containers/c1');
  t.is(ct.status, 0, ct.stderr);
  t.is(JSON.parse(ct.stdout).type, 'container');
  t.deepEqual(JSON.parse((await lxc(d.socket, 'query', '/1.0/virtual-machines')).stdout), []);
  t.deepEqual(JSON.parse((await lxc(d.socket, 'query', '/1.0/containers')).stdout), ['/1.0/containers/c1']);
  t.deepEqual(JSON.parse((await lxc(d.socket, 'query', '/1.0/instances')).stdout), ['/1.0/instances/c1']);
});

test.serial('collections list their own type under their own URLs', async (t) => {
  t.deepEqual((await d.request('GET', '/1.0/virtual-machines')).json.metadata, []);
  t.deepEqual((await d.request('GET', '/1.0/virtual-machines?recursion=1')).json.metadata, []);
  t.deepEqual((await d.request('GET', '/1.0/containers?recursion=1')).json.metadata.map((i: { name: string }) => i.name), ['c1']);
  t.is((await d.request('GET', '/1.0/virtual-machines/absent')).status, 404);
});

test.serial('the body type wins over the collection, which only fills it in when absent', async (t) => {
  // Through /1.0/virtual-machines with `type: container`: a container, as the reference makes it.
  const made = await callAndWait(d, 'POST', '/1.0/virtual-machines', { name: 'c2', type: 'container', source: { type: 'image', alias: 'bb' } });
  t.is(made.status, 202, made.body);
  t.is(made.op.status, 'Success', made.op.err);
  t.deepEqual(made.op.resources, { instances: ['/1.0/instances/c2'], containers: ['/1.0/containers/c2'] });
  t.is((await d.request('GET', '/1.0/containers/c2')).json.metadata.type, 'container');
  t.is((await d.request('GET', '/1.0/virtual-machines/c2')).status, 404);
  // Without a type, /1.0/virtual-machines asks for a VM; this build has no VM driver.
  const vm = await d.request('POST', '/1.0/virtual-machines', { name: 'v1', source: { type: 'none' } });
  t.is(vm.status, 400);
  t.regex(vm.json.error, /virtual-machine/);
  const asked = await d.request('POST', '/1.0/containers', { name: 'v2', type: 'virtual-machine', source: { type: 'none' } });
  t.is(asked.status, 400);
  t.regex(asked.json.error, /virtual-machine/);
  t.is((await d.request('POST', '/1.0/containers', { name: 'x', type: 'bogus', source: { type: 'none' } })).status, 400);
  t.deepEqual((await d.request('GET', '/1.0/instances')).json.metadata, ['/1.0/instances/c1', '/1.0/instances/c2']);
  t.is((await callAndWait(d, 'DELETE', '/1.0/containers/c2')).op.status, 'Success');
});

test.serial('URLs below an instance and event sources name /1.0/instances whichever collection the client used', async (t) => {
  const events = await d.websocket('/1.0/events?type=lifecycle');
  const seen = collect(events);
  t.deepEqual((await d.request('GET', '/1.0/containers/c1/snapshots')).json.metadata, ['/1.0/instances/c1/snapshots/s0']);
  const backup = await callAndWait(d, 'POST', '/1.0/containers/c1/backups', { name: 'b1' });
  t.is(backup.op.status, 'Success', backup.op.err);
  t.deepEqual((await d.request('GET', '/1.0/containers/c1/backups')).json.metadata, ['/1.0/instances/c1/backups/b1']);
  t.is((await callAndWait(d, 'DELETE', '/1.0/containers/c1/backups/b1')).op.status, 'Success');
  const started = await callAndWait(d, 'PUT', '/1.0/containers/c1/state', { action: 'start' });
  t.is(started.op.status, 'Success', started.op.err);
  t.deepEqual(started.op.resources, { instances: ['/1.0/instances/c1'] }, 'a state change names /1.0/instances only, as the reference does');
  try {
    const exec = await callAndWait(d, 'POST', '/1.0/containers/c1/exec', { command: ['echo', 'hi'], 'record-output': true, 'wait-for-websocket': false, interactive: false });
    t.is(exec.op.status, 'Success', exec.op.err);
    t.deepEqual(exec.op.resources, { instances: ['/1.0/instances/c1'], containers: ['/1.0/containers/c1'] });
    t.regex(exec.op.metadata.output['1'], /^\/1\.0\/instances\/c1\/logs\/exec_[\w-]+\.stdout$/);
    const logs: string[] = (await d.request('GET', '/1.0/containers/c1/logs')).json.metadata;
    t.true(logs.length > 0);
    for (const url of logs) t.true(url.startsWith('/1.0/instances/c1/logs/'), url);
    t.is((await d.request('GET', '/1.0/containers/c1/logs/lxc.log')).status, 200);
    await waitFor(() => seen.some((e) => e.metadata.action === 'instance-log-retrieved'), 10000, 'the log event');
    t.is(seen.find((e) => e.metadata.action === 'instance-log-retrieved').metadata.source, '/1.0/instances/c1/logs/lxc.log');
    t.true(seen.filter((e) => e.metadata.action.startsWith('instance-')).every((e) => e.metadata.source.startsWith('/1.0/instances/c1')));
    // A running container is not found under /1.0/virtual-machines either: its console log is left alone.
    t.is((await d.request('DELETE', '/1.0/virtual-machines/c1/console')).status, 404);
    t.is((await d.request('PUT', '/1.0/virtual-machines/c1/state', { action: 'stop', force: true })).status, 404);
    t.is((await d.request('GET', '/1.0/instances/c1/state')).json.metadata.status, 'Running');
  } finally {
    await lxc(d.socket, 'stop', '--force', 'c1');
  }
});
