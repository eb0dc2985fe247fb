/**
 * Many instances on one daemon (issue 21, kept small: 200): listings, filters, used_by and project
 * state stay right while the record index and the listing views are in play, every acknowledged write
 * is seen by the next read, and many containers start and stop at once through `lxc start --all` and
 * the bulk `PUT /1.0/instances`, then are adopted again by a restarted daemon. Outcomes, not timings
 * (the scale bench measures those).
 */
import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { killContainers, startDaemon, startWithPool, waitFor, type Daemon } from '../helpers/daemon.js';
import { callAndWait, importImage } from '../helpers/api.js';
import { buildBusyboxImage } from '../helpers/busybox-image.js';
import { lxc, lxcOk } from '../helpers/clients.js';

const COUNT = 200;
const PROJECT = 'x3run';
const dir = mkdtempSync(path.join(tmpdir(), 'x3scale-test-'));
let d: Daemon;

const call = (method: string, url: string, body?: unknown) => callAndWait(d, method, url, body);
const names = (list: { name: string }[]) => list.map((i) => i.name);

async function createAll(prefix: string, count: number, body: Record<string, unknown>, query = ''): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: 8 }, async () => {
    while (next < count) {
      const name = `${prefix}${next++}`;
      const res = await call('POST', `/1.0/instances${query}`, { name, ...body });
      if (res.op?.status !== 'Success') throw new Error(`creating ${name}: ${res.op?.err ?? res.json?.error}`);
    }
  }));
}

test.before(async () => {
  d = await startWithPool({ plugins: 'full', dir });
  const image = buildBusyboxImage('gzip');
  await importImage(d, image.unified, 'bb');
  rmSync(image.dir, { recursive: true, force: true });
  await createAll('x3t', COUNT, { source: { type: 'none' } });
});

test.after.always(async () => {
  await d?.stop();
  killContainers(dir);
  rmSync(dir, { recursive: true, force: true });
});

test.serial(`${COUNT} instances: every recursion level, filters, used_by and project state tell all of them`, async (t) => {
  const expected = Array.from({ length: COUNT }, (_, i) => `x3t${i}`).sort();
  const r0 = (await call('GET', '/1.0/instances')).json.metadata as string[];
  t.deepEqual(r0, expected.map((n) => `/1.0/instances/${n}`));
  const r1 = (await call('GET', '/1.0/instances?recursion=1')).json.metadata;
  t.deepEqual(names(r1), expected);
  t.true(r1.every((i: any) => i.status === 'Stopped' && i.expanded_devices.root?.pool === 'default'));
  const r2 = (await call('GET', '/1.0/instances?recursion=2')).json.metadata;
  t.deepEqual(names(r2), expected);
  t.true(r2.every((i: any) => i.state.status === 'Stopped' && i.state.pid === 0));
  t.deepEqual(names((await call('GET', '/1.0/instances?recursion=1&filter=name+eq+x3t17')).json.metadata), ['x3t17']);
  t.deepEqual((await call('GET', `/1.0/instances?recursion=1&filter=${encodeURIComponent('status eq Running')}`)).json.metadata, []);
  const profile = (await call('GET', '/1.0/profiles/default')).json.metadata;
  t.deepEqual([...profile.used_by].sort(), expected.map((n) => `/1.0/instances/${n}`).sort());
  const pool = (await call('GET', '/1.0/storage-pools/default')).json.metadata;
  t.is(pool.used_by.filter((u: string) => u.startsWith('/1.0/instances/')).length, COUNT);
  const state = (await call('GET', '/1.0/projects/default/state')).json.metadata;
  t.is(state.resources.instances.Usage, COUNT);
  t.is(state.resources.containers.Usage, COUNT);
});

test.serial('a write acknowledged is seen by the next listing: edit, rename, delete, create, profile edit', async (t) => {
  // Warm every cache first: the listing before each write must not be what the one after it shows.
  await call('GET', '/1.0/instances?recursion=1');
  t.is((await call('PATCH', '/1.0/instances/x3t5', { config: { 'user.seen': 'yes' } })).status, 200);
  const after = (await call('GET', '/1.0/instances?recursion=1&filter=name+eq+x3t5')).json.metadata;
  t.is(after[0].config['user.seen'], 'yes');
  t.is(after[0].expanded_config['user.seen'], 'yes');

  t.is((await call('POST', '/1.0/instances/x3t6', { name: 'x3renamed' })).op.status, 'Success');
  let r1 = names((await call('GET', '/1.0/instances?recursion=1')).json.metadata);
  t.true(r1.includes('x3renamed'));
  t.false(r1.includes('x3t6'));

  t.is((await call('DELETE', '/1.0/instances/x3t7')).op.status, 'Success');
  t.is((await call('POST', '/1.0/instances', { name: 'x3fresh', source: { type: 'none' } })).op.status, 'Success');
  r1 = names((await call('GET', '/1.0/instances?recursion=1')).json.metadata);
  t.false(r1.includes('x3t7'));
  t.true(r1.includes('x3fresh'));
  t.is(r1.length, COUNT);
  t.true((await call('GET', '/1.0/profiles/default')).json.metadata.used_by.includes('/1.0/instances/x3fresh'));

  // A profile edit shows in every listed instance's expanded config at once.
  const profile = (await call('GET', '/1.0/profiles/default')).json.metadata;
  t.is((await call('PUT', '/1.0/profiles/default', { config: { ...profile.config, 'user.from-profile': 'p1' }, devices: profile.devices, description: profile.description })).status, 200);
  const expanded = (await call('GET', '/1.0/instances?recursion=1')).json.metadata;
  t.true(expanded.every((i: any) => i.expanded_config['user.from-profile'] === 'p1'));
  t.is((await call('PUT', '/1.0/profiles/default', { config: profile.config, devices: profile.devices, description: profile.description })).status, 200);
  t.true((await call('GET', '/1.0/instances?recursion=1')).json.metadata.every((i: any) => i.expanded_config['user.from-profile'] === undefined));

  // Writes racing with listings: each listing answered after a create's acknowledgement has it.
  const racing = Array.from({ length: 20 }, (_, i) => `x3race${i}`);
  await Promise.all(racing.map(async (name) => {
    t.is((await call('POST', '/1.0/instances', { name, source: { type: 'none' } })).op.status, 'Success');
    t.true(names((await call('GET', '/1.0/instances?recursion=1')).json.metadata).includes(name), name);
  }));
  await Promise.all(racing.map(async (name) => {
    t.is((await call('DELETE', `/1.0/instances/${name}`)).op.status, 'Success');
    t.false(names((await call('GET', '/1.0/instances?recursion=1')).json.metadata).includes(name), name);
  }));
});

test.serial('bulk PUT /1.0/instances refuses bad input with 400 and changes nothing (instance_bulk_state_change)', async (t) => {
  const cases: [unknown, RegExp][] = [
    [{}, /state/i],
    [{ state: { action: 'teleport' } }, /action|teleport/i],
    [{ state: 'start' }, /state|object/i],
    [{ state: { action: 'start', timeout: 'soon' } }, /timeout/i],
  ];
  for (const [body, message] of cases) {
    const res = await call('PUT', '/1.0/instances', body);
    t.is(res.status, 400, JSON.stringify(body));
    t.is(res.json.type, 'error');
    t.regex(res.json.error, message, JSON.stringify(body));
  }
  t.deepEqual((await call('GET', `/1.0/instances?recursion=1&filter=${encodeURIComponent('status eq Running')}`)).json.metadata, []);
  t.is((await call('PUT', '/1.0/instances?project=x3nope', { state: { action: 'start' } })).status, 404);
});

test.serial('many containers at once: lxc start --all, bulk stop and start (instance_bulk_state_change), adopted after a restart', async (t) => {
  const RUNNING = 8;
  t.is((await call('POST', '/1.0/projects', { name: PROJECT, config: { 'features.profiles': 'false', 'features.images': 'false', 'features.storage.volumes': 'false' } })).status, 200);
  await createAll('x3r', RUNNING, { source: { type: 'image', alias: 'bb' } }, `?project=${PROJECT}`);
  const expected = Array.from({ length: RUNNING }, (_, i) => `x3r${i}`).sort();
  const running = async () => ((await call('GET', `/1.0/instances?recursion=2&project=${PROJECT}`)).json.metadata as any[])
    .filter((i) => i.status === 'Running' && i.state.pid > 0).map((i) => i.name).sort();

  // The real client: `--all` lists the project's instances and starts each.
  await lxcOk(t, d.socket, 'start', '--all', '--project', PROJECT);
  t.deepEqual(await running(), expected);
  // The default project's empty instances were not touched.
  t.deepEqual((await call('GET', `/1.0/instances?recursion=1&filter=${encodeURIComponent('status eq Running')}`)).json.metadata, []);

  const events = await d.websocket(`/1.0/events?type=lifecycle&project=${PROJECT}`);
  const seen: string[] = [];
  events.on('message', (m) => seen.push(JSON.parse(String(m)).metadata.action));
  const stop = await call('PUT', `/1.0/instances?project=${PROJECT}`, { state: { action: 'stop', force: true } });
  t.is(stop.op.status, 'Success', stop.op.err);
  t.deepEqual(await running(), []);
  await waitFor(() => seen.filter((a) => a === 'instance-stopped' || a === 'instance-shutdown').length >= RUNNING, 10_000, 'a stop event per instance');

  const start = await call('PUT', `/1.0/instances?project=${PROJECT}`, { state: { action: 'start' } });
  t.is(start.op.status, 'Success', start.op.err);
  t.deepEqual(await running(), expected);
  // Already running: a second bulk start leaves them alone and succeeds.
  t.is((await call('PUT', `/1.0/instances?project=${PROJECT}`, { state: { action: 'start' } })).op.status, 'Success');
  const pids = ((await call('GET', `/1.0/instances?recursion=2&project=${PROJECT}`)).json.metadata as any[]).map((i) => i.state.pid).sort();

  // SIGTERM leaves the containers running; the next daemon adopts each (the same init processes).
  await d.stop();
  d = await startDaemon({ plugins: 'full', dir });
  await waitFor(async () => (await running()).length === RUNNING, 20_000, 'every container seen running again');
  t.deepEqual(((await call('GET', `/1.0/instances?recursion=2&project=${PROJECT}`)).json.metadata as any[]).map((i) => i.state.pid).sort(), pids);
  t.is((await call('GET', '/1.0/instances')).json.metadata.length, COUNT);

  const stopped = await lxc(d.socket, 'stop', '--all', '--force', '--project', PROJECT);
  t.is(stopped.status, 0, stopped.stderr);
  t.deepEqual(await running(), []);
});
