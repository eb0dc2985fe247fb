/**
 * Instances across daemon restarts and host shutdown: boot.autostart, boot.autostart.priority and
 * .delay, boot.stop.priority and boot.host_shutdown_timeout, with real containers.
 */
import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { collect, killContainers, startDaemon, stopDaemons, waitFor, type Daemon, startWithPool } from '../helpers/daemon.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { importImage } from '../helpers/api.js';

let image: BusyboxImage;
const dir = mkdtempSync(path.join(tmpdir(), 'corral-boot-'));

test.before(() => {
  image = buildBusyboxImage('gzip');
});

test.after.always(async () => {
  await stopDaemons();
  killContainers(dir);
  rmSync(dir, { recursive: true, force: true });
  rmSync(image.dir, { recursive: true, force: true });
});

async function call(d: Daemon, method: string, url: string, body?: unknown): Promise<any> {
  const res = await d.request(method, url, body);
  if (res.json?.type === 'async') {
    const op = (await d.request('GET', `${res.json.operation}/wait?timeout=60`)).json.metadata;
    if (op.status !== 'Success') throw new Error(`${method} ${url}: ${op.err}`);
    return op;
  }
  if (res.status >= 400) throw new Error(`${method} ${url}: ${res.json?.error}`);
  return res.json.metadata;
}

const status = async (d: Daemon, name: string) => (await call(d, 'GET', `/1.0/instances/${name}`)).status as string;

test.serial('host shutdown stops by boot.stop.priority (container_stop_priority, container_host_shutdown_timeout); the next start brings back what ran and what autostarts, by priority and delay (container_last_used_at)', async (t) => {
  let d = await startWithPool({ dir });
  const fingerprint = await importImage(d, image.unified, 'bb');
  const create = (name: string, config: Record<string, string> = {}) =>
    call(d, 'POST', '/1.0/instances', { name, config, source: { type: 'image', fingerprint } });
  await create('first', { 'boot.autostart': 'true', 'boot.autostart.priority': '10', 'boot.autostart.delay': '2' });
  await create('second', { 'boot.autostart': 'true' });
  await create('was-running', { 'boot.stop.priority': '5', 'boot.host_shutdown_timeout': '1' });
  await create('late', { 'boot.stop.priority': '1' });
  await create('opted-out', { 'boot.autostart': 'false' });
  await create('idle');
  for (const name of ['was-running', 'late', 'opted-out']) await call(d, 'PUT', `/1.0/instances/${name}/state`, { action: 'start' });

  const events = collect(await d.websocket('/1.0/events?type=lifecycle'));
  const exited = new Promise((resolve) => d.child.once('exit', resolve));
  d.child.kill('SIGPWR');
  await exited;
  const shutdowns = events.filter((e) => e.metadata.action === 'instance-shutdown').map((e) => e.metadata.source.split('/').pop());
  t.deepEqual(shutdowns, ['was-running', 'late', 'opted-out'].filter((n) => shutdowns.includes(n)), 'higher boot.stop.priority first');
  t.true(shutdowns.includes('was-running') && shutdowns.includes('late'));

  d = await startDaemon({ plugins: 'edge', dir });
  const back = ['first', 'second', 'was-running', 'late'];
  await waitFor(async () => (await Promise.all(back.map((n) => status(d, n)))).every((s) => s === 'Running'), 20000, 'the autostarts');
  t.is(await status(d, 'opted-out'), 'Stopped', 'boot.autostart=false wins over the last state');
  t.is(await status(d, 'idle'), 'Stopped');
  const startedAt = async (name: string) => Date.parse((await call(d, 'GET', `/1.0/instances/${name}`)).last_used_at);
  t.true(await startedAt('second') - await startedAt('first') >= 2000, 'boot.autostart.delay waits after the higher priority start');

  // A plain restart (SIGTERM) leaves containers running and the next daemon adopts them.
  const pid = (await call(d, 'GET', '/1.0/instances/late/state')).pid;
  await d.stop();
  d = await startDaemon({ plugins: 'edge', dir });
  t.is((await call(d, 'GET', '/1.0/instances/late/state')).pid, pid, 'adopted, not restarted');
  for (const name of ['first', 'second', 'was-running', 'late']) await call(d, 'PUT', `/1.0/instances/${name}/state`, { action: 'stop', force: true });
  await d.stop();
});

test.serial('autostart runs beside the open API: what a client changes during an earlier start\'s delay is left as the client left it', async (t) => {
  const own = mkdtempSync(path.join(tmpdir(), 'corral-boot-race-'));
  let d = await startWithPool({ dir: own });
  try {
    const fingerprint = await importImage(d, image.unified, 'bb');
    const create = (name: string, config: Record<string, string>) => call(d, 'POST', '/1.0/instances', { name, config, source: { type: 'image', fingerprint } });
    await create('lead', { 'boot.autostart': 'true', 'boot.autostart.priority': '10', 'boot.autostart.delay': '4' });
    await create('opted', { 'boot.autostart': 'true' });
    await create('manual', { 'boot.autostart': 'true' });
    await d.stop();
    d = await startDaemon({ plugins: 'edge', dir: own });
    await waitFor(async () => (await status(d, 'lead')) === 'Running', 20000, 'the first autostart');
    // Within lead's delay: one opted out, the other started by hand.
    await call(d, 'PATCH', '/1.0/instances/opted', { config: { 'boot.autostart': 'false' } });
    await call(d, 'PUT', '/1.0/instances/manual/state', { action: 'start' });
    const pid = (await call(d, 'GET', '/1.0/instances/manual/state')).pid;
    await new Promise((r) => setTimeout(r, 5000));
    t.is(await status(d, 'opted'), 'Stopped', 'opted out before its turn: not started');
    t.is((await call(d, 'GET', '/1.0/instances/manual/state')).pid, pid, 'started by hand before its turn: left running, not started again');
    const warnings = (await call(d, 'GET', '/1.0/warnings?recursion=1')) as { type: string }[];
    t.false(warnings.some((w) => w.type === 'Instance autostart failure'), 'no autostart failed');
    for (const name of ['lead', 'manual']) await call(d, 'PUT', `/1.0/instances/${name}/state`, { action: 'stop', force: true });
  } finally {
    await d.stop();
    killContainers(own);
    rmSync(own, { recursive: true, force: true });
  }
});
