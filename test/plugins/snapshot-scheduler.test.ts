/**
 * The minute scheduler on a real daemon: a `* * * * *` schedule produces a snapshot within the
 * next minute tick, an expired snapshot is gone after it, both as visible operations; `@startup`
 * snapshots on start.
 */
import test from 'ava';
import { waitFor, type Daemon } from '../helpers/daemon.js';
import { startWithImage, stopImageDaemons } from '../helpers/image-daemon.js';
import { callAndWait } from '../helpers/api.js';

let d: Daemon;

const call = (method: string, url: string, body?: unknown) => callAndWait(d, method, url, body);
const snapshots = async (name: string) => ((await d.request('GET', `/1.0/instances/${name}/snapshots?recursion=1`)).json.metadata as any[]);

test.before(async () => {
  d = await startWithImage({ plugins: 'full' });
});

test.after.always(stopImageDaemons);

test.serial('a cron schedule snapshots within a minute and expired snapshots are removed (snapshot_scheduling)', async (t) => {
  t.timeout(210_000);
  await call('POST', '/1.0/instances', { name: 'sched', source: { type: 'image', alias: 'bb' } });
  const soon = new Date(Date.now() + 3_000).toISOString();
  t.is((await call('POST', '/1.0/instances/sched/snapshots', { name: 'short', expires_at: soon })).op.status, 'Success');
  const res = await call('PATCH', '/1.0/instances/sched', { config: { 'snapshots.schedule': '* * * * *', 'snapshots.schedule.stopped': 'true', 'snapshots.pattern': 'auto%d' } });
  t.is(res.status, 200, res.body);

  // The same schedule in a project whose restrictions block snapshots takes none.
  const made = await d.request('POST', '/1.0/projects', { name: 'nosnap', config: { 'features.images': 'false', restricted: 'true' } });
  t.is(made.status, 200, made.body);
  const pool = (await d.request('GET', '/1.0/storage-pools?recursion=1')).json.metadata[0].name;
  const root = { root: { type: 'disk', path: '/', pool } };
  const inRestricted = await call('POST', '/1.0/instances?project=nosnap', { name: 'sched', source: { type: 'image', alias: 'bb' }, devices: root });
  t.is(inRestricted.op.status, 'Success', inRestricted.op.err);
  t.is((await call('PATCH', '/1.0/instances/sched?project=nosnap', { config: { 'snapshots.schedule': '* * * * *', 'snapshots.schedule.stopped': 'true' } })).status, 200);

  await waitFor(async () => (await snapshots('sched')).some((s) => s.name === 'auto0'), 125_000, 'a scheduled snapshot');
  const blocked = await d.request('GET', '/1.0/instances/sched/snapshots?project=nosnap');
  t.deepEqual(blocked.json.metadata, [], 'restricted.snapshots=block holds for scheduled snapshots');
  // A tick that came before `short` expired leaves it for the next one, a minute later.
  await waitFor(async () => !(await snapshots('sched')).some((s) => s.name === 'short'), 70_000, 'the expired snapshot to go');
  const ops = (await d.request('GET', '/1.0/operations?recursion=1')).json.metadata;
  const all = [...(ops.success ?? []), ...(ops.running ?? [])].map((o: any) => o.description);
  t.true(all.includes('Creating scheduled snapshots'), all.join(', '));
  t.true(all.includes('Cleaning up expired instance snapshots'), all.join(', '));
});

test.serial('a stopped instance is skipped unless snapshots.schedule.stopped; @startup snapshots on start (snapshot_schedule_aliases, snapshots_schedule_aliases)', async (t) => {
  t.timeout(150_000);
  await call('POST', '/1.0/instances', { name: 'boot', source: { type: 'image', alias: 'bb' } });
  t.is((await call('PATCH', '/1.0/instances/boot', { config: { 'snapshots.schedule': '@startup, @hourly' } })).status, 200);
  t.is((await call('PUT', '/1.0/instances/boot/state', { action: 'start' })).op.status, 'Success');
  await waitFor(async () => (await snapshots('boot')).length === 1, 15_000, 'the startup snapshot');
  t.is((await snapshots('boot'))[0].name, 'snap0');
  await call('PUT', '/1.0/instances/boot/state', { action: 'stop', force: true });

  for (const alias of ['@hourly', '@daily', '@midnight', '@weekly', '@monthly', '@annually', '@yearly', '@startup']) {
    t.is((await d.request('PATCH', '/1.0/instances/boot', { config: { 'snapshots.schedule': alias } })).status, 200, alias);
  }
  const refused = await d.request('PATCH', '/1.0/instances/boot', { config: { 'snapshots.schedule': '@fortnightly' } });
  t.is(refused.status, 400);
});
