/**
 * Instance snapshots' expiry, schedules and names through the real `lxc` client (issue 14, item
 * 5): `snapshots.expiry` on `lxc snapshot` (which sends `expires_at: null`), `--no-expiry` and an
 * explicit `expires_at`; `@startup` on `lxc start` and `lxc restart -f`, `@never`, every alias
 * accepted; `snapshots.pattern` names as the reference gives them.
 */
import test from 'ava';
import { rmSync } from 'node:fs';
import { startWithPool, stopDaemons, killContainers, waitFor, type Daemon } from '../helpers/daemon.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { importImage } from '../helpers/api.js';
import { lxc, lxcOk } from '../helpers/clients.js';
import { expiryFrom } from '../../sdk/lib/snapshots/expiry.js';
import { formatGoTime } from '../../sdk/lib/snapshots/pattern.js';

let d: Daemon;
let image: BusyboxImage;

const run = (t: any, ...args: string[]) => lxcOk(t, d.socket, ...args);
const snapshots = async (t: any, name: string) => JSON.parse(await run(t, 'query', `/1.0/instances/${name}/snapshots?recursion=1`)) as any[];
const names = async (t: any, name: string) => (await snapshots(t, name)).map((s) => s.name);
const NEVER = '0001-01-01T00:00:00Z';

test.before(async () => {
  image = buildBusyboxImage('gzip');
  d = await startWithPool();
  await importImage(d, image.unified, 'bb');
});

test.after.always(async () => {
  killContainers(d?.dir);
  await stopDaemons();
  if (image) rmSync(image.dir, { recursive: true, force: true });
});

test.serial('snapshots.expiry gives lxc snapshot its expiry; --no-expiry and an explicit expires_at win; an empty one is refused', async (t) => {
  await run(t, 'init', 'bb', 'e1');
  await run(t, 'config', 'set', 'e1', 'snapshots.expiry', '1d');
  await run(t, 'snapshot', 'e1', 'daily');
  let [snap] = await snapshots(t, 'e1');
  t.is(Date.parse(snap.expires_at) - Date.parse(snap.created_at), 24 * 3600 * 1000, `a day after creation: ${snap.created_at} -> ${snap.expires_at}`);
  t.regex(await run(t, 'info', 'e1'), /daily .*\| \d{4}\/\d\d\/\d\d \d\d:\d\d UTC \| \d{4}\/\d\d\/\d\d \d\d:\d\d UTC/, 'lxc info shows when it expires');

  // Every unit at once, as the reference writes them: M minutes, H hours, d days, w weeks, m months, y years.
  await run(t, 'config', 'set', 'e1', 'snapshots.expiry', '1M 2H 3d 4w 5m 6y');
  await run(t, 'snapshot', 'e1', 'mixed');
  snap = (await snapshots(t, 'e1')).find((s) => s.name === 'mixed');
  t.is(snap.expires_at, expiryFrom('1M 2H 3d 4w 5m 6y', new Date(snap.created_at))!.toISOString());

  await run(t, 'snapshot', 'e1', 'kept', '--no-expiry');
  t.is((await snapshots(t, 'e1')).find((s) => s.name === 'kept').expires_at, NEVER);

  await run(t, 'query', '-X', 'POST', '-d', JSON.stringify({ name: 'explicit', expires_at: '2030-01-02T03:04:05Z' }), '/1.0/instances/e1/snapshots');
  await waitFor(async () => (await names(t, 'e1')).includes('explicit'), 10_000, 'the explicit snapshot');
  t.is((await snapshots(t, 'e1')).find((s) => s.name === 'explicit').expires_at, '2030-01-02T03:04:05Z');

  const empty = await lxc(d.socket, 'query', '-X', 'POST', '-d', JSON.stringify({ name: 'empty', expires_at: '' }), '/1.0/instances/e1/snapshots');
  t.not(empty.status, 0);
  t.regex(empty.stderr, /expires_at/);
  t.false((await names(t, 'e1')).includes('empty'));

  // Bad expiry expressions are refused when set, as the reference refuses them.
  for (const bad of ['1x', '1D', '-1d', '1d 1d', '1d,2H', '1d2H']) {
    t.not((await lxc(d.socket, 'config', 'set', 'e1', 'snapshots.expiry', bad)).status, 0, bad);
  }
  for (const good of ['0d', ' 1d', '6y 5m']) {
    t.is((await lxc(d.socket, 'config', 'set', 'e1', 'snapshots.expiry', good)).status, 0, good);
  }
});

test.serial('@startup snapshots on lxc start and lxc restart -f; @never and an empty schedule do not', async (t) => {
  t.timeout(180_000);
  await run(t, 'init', 'bb', 's1');
  await run(t, 'config', 'set', 's1', 'snapshots.schedule', '@startup');
  await run(t, 'config', 'set', 's1', 'snapshots.expiry', '2H');
  // Taken within the start, before the instance runs: there when lxc start returns, as in the reference.
  await run(t, 'start', 's1');
  t.deepEqual(await names(t, 's1'), ['snap0'], 'a snapshot at start');
  const started = JSON.parse(await run(t, 'query', '/1.0/instances/s1')).last_used_at;
  t.true(Date.parse((await snapshots(t, 's1'))[0].created_at) <= Date.parse(started), 'taken before the instance ran');
  await run(t, 'restart', '-f', 's1');
  t.deepEqual(await names(t, 's1'), ['snap0', 'snap1'], 'a snapshot at restart');
  const taken = await snapshots(t, 's1');
  t.is(Date.parse(taken[0].expires_at) - Date.parse(taken[0].created_at), 2 * 3600 * 1000, 'scheduled snapshots expire too');

  // From a profile, beside another alias.
  await run(t, 'config', 'unset', 's1', 'snapshots.schedule');
  await run(t, 'profile', 'create', 'boot-snap');
  await run(t, 'profile', 'set', 'boot-snap', 'snapshots.schedule', '@daily, @startup');
  await run(t, 'profile', 'add', 's1', 'boot-snap');
  await run(t, 'restart', 's1');
  t.is((await names(t, 's1')).length, 3, 'a snapshot at a clean restart, from the profile');

  for (const none of ['@never', '']) {
    await run(t, 'config', 'set', 's1', 'snapshots.schedule', none);
    await run(t, 'restart', '-f', 's1');
    await new Promise((r) => setTimeout(r, 3000));
    t.is((await names(t, 's1')).length, 3, `no snapshot with "${none}"`);
  }
  await run(t, 'stop', '-f', 's1');
});

test.serial('every alias the reference knows is accepted by lxc config set; others are refused', async (t) => {
  for (const alias of ['@hourly', '@daily', '@midnight', '@weekly', '@monthly', '@annually', '@yearly', '@startup', '@never', '@HOURLY', '@hourly, @startup', '@never, 0 6 * * *']) {
    const res = await lxc(d.socket, 'config', 'set', 's1', 'snapshots.schedule', alias);
    t.is(res.status, 0, `${alias}: ${res.stderr}`);
    t.is((await run(t, 'config', 'get', 's1', 'snapshots.schedule')).trim(), alias, 'kept as written');
  }
  for (const bad of ['@every 1h', '@reboot', '@fortnightly', 'sometimes']) {
    const res = await lxc(d.socket, 'config', 'set', 's1', 'snapshots.schedule', bad);
    t.not(res.status, 0, bad);
    t.regex(res.stderr, /snapshots\.schedule/);
  }
});

test.serial('snapshots.pattern names lxc snapshot as the reference does', async (t) => {
  await run(t, 'init', 'bb', 'p1');
  const day = formatGoTime('2006-01-02', new Date());
  const cases: [string, string[]][] = [
    ['auto-%d', ['auto-0', 'auto-1', 'auto-2']],
    ['%d', ['0', '1', '2']],
    ['fixed', ['fixed', 'fixed-0', 'fixed-1']],
    ["{{ creation_date|date:'2006-01-02' }}", [day, `${day}-0`, `${day}-1`]],
    ["{{ creation_date|date:'2006-01-02' }}-%d", [`${day}-0`, `${day}-1`, `${day}-2`]],
  ];
  for (const [pattern, expected] of cases) {
    await run(t, 'config', 'set', 'p1', 'snapshots.pattern', pattern);
    for (let i = 0; i < 3; i++) await run(t, 'snapshot', 'p1');
    t.deepEqual(await names(t, 'p1'), expected, pattern);
    for (const n of expected) await run(t, 'delete', `p1/${n}`);
  }

  // The index after the highest in use: gaps stay, named snapshots count when they fit the pattern.
  await run(t, 'config', 'unset', 'p1', 'snapshots.pattern');
  for (let i = 0; i < 3; i++) await run(t, 'snapshot', 'p1');
  await run(t, 'delete', 'p1/snap1');
  await run(t, 'snapshot', 'p1');
  await run(t, 'snapshot', 'p1', 'snap7');
  await run(t, 'snapshot', 'p1');
  await run(t, 'snapshot', 'p1', 'snap-x');
  await run(t, 'snapshot', 'p1', 'snap010');
  await run(t, 'snapshot', 'p1');
  t.deepEqual(await names(t, 'p1'), ['snap0', 'snap2', 'snap3', 'snap7', 'snap8', 'snap-x', 'snap010', 'snap11'], 'as the reference names them');
});
