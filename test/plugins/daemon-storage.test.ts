/**
 * Daemon storage (`daemon_storage`) through a real daemon: `storage.images_volume` and
 * `storage.backups_volume` move image files and backup tarballs into a custom volume and back,
 * new files land there, the volume is held (`used_by` /1.0, no delete, rename or snapshot),
 * refused values change nothing, a restart keeps the setting, and a volume whose pool is missing
 * at start leaves the daemon up with a warning and its kind unavailable.
 */
import test, { type ExecutionContext } from 'ava';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startWithPool, startDaemon, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { callAndWait, importImage } from '../helpers/api.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';

let d: Daemon;
let image: BusyboxImage;
let dataDir: string;
let fingerprint: string;

const call = (method: string, url: string, body?: unknown) => callAndWait(d, method, url, body);
const volumeDir = (name: string, pool = 'default') => path.join(dataDir, 'storage-pools', pool, 'custom', `default_${name}`);
const entries = (dir: string) => (existsSync(dir) ? readdirSync(dir).filter((e) => !e.startsWith('.')).sort() : []);
const serverConfig = async () => (await d.request('GET', '/1.0')).json.metadata.config as Record<string, string>;
const setKey = (key: string, value: string) => d.request('PATCH', '/1.0', { config: { [key]: value } });
/** The old copies go once the new value is stored, just after the answer. */
const emptied = (dir: string) => waitFor(() => entries(dir).length === 0, 5000, `${dir} to be emptied`);

function ok(t: ExecutionContext, res: { status: number; op?: any; json: any }, what: string): void {
  t.true(res.status === 200 || res.status === 202, `${what}: ${res.status} ${JSON.stringify(res.json)}`);
  if (res.op) t.is(res.op.status, 'Success', `${what}: ${res.op.err}`);
}

test.before(async () => {
  image = buildBusyboxImage();
  dataDir = mkdtempSync(path.join(tmpdir(), 'corral-daemon-storage-'));
  d = await startWithPool({ dir: dataDir });
  fingerprint = await importImage(d, image.unified, 'bb');
});

test.after.always(async () => {
  await stopDaemons();
  rmSync(dataDir, { recursive: true, force: true });
});

test.serial('bad values of the daemon_storage keys are refused with 400 and change nothing', async (t) => {
  ok(t, await call('POST', '/1.0/storage-pools/default/volumes/custom', { name: 'blk', content_type: 'block', config: { size: '1MiB' } }), 'block volume');
  ok(t, await call('POST', '/1.0/storage-pools/default/volumes/custom', { name: 'snapped' }), 'volume');
  ok(t, await call('POST', '/1.0/storage-pools/default/volumes/custom/snapped/snapshots', { name: 's0' }), 'snapshot');
  ok(t, await call('POST', '/1.0/storage-pools/default/volumes/custom', { name: 'full' }), 'volume');
  writeFileSync(path.join(volumeDir('full'), 'somebody-else'), 'x');
  ok(t, await call('POST', '/1.0/storage-pools/default/volumes/custom', { name: 'shared' }), 'volume');
  ok(t, await call('POST', '/1.0/profiles', { name: 'withvol', devices: { data: { type: 'disk', pool: 'default', source: 'shared', path: '/mnt' } } }), 'profile');

  const cases: [string, RegExp][] = [
    ['nopool', /<pool>\/<volume>/],
    ['default/a/b', /<pool>\/<volume>/],
    ['default/missing', /not found/],
    ['missing/imgs', /not found/],
    ['default/blk', /block/],
    ['default/snapped', /snapshots/],
    ['default/full', /not empty/],
    ['default/shared', /in use by \/1\.0\/profiles\/withvol/],
  ];
  for (const key of ['storage.images_volume', 'storage.backups_volume']) {
    for (const [value, message] of cases) {
      const res = await setKey(key, value);
      t.is(res.status, 400, `${key}=${value}: ${res.body}`);
      t.regex(res.json.error, message, `${key}=${value}`);
    }
  }
  const config = await serverConfig();
  t.false('storage.images_volume' in config);
  t.false('storage.backups_volume' in config);
  t.deepEqual(entries(path.join(dataDir, 'images')), [fingerprint], 'the image stays in the data dir');
  t.deepEqual(entries(volumeDir('full')), ['somebody-else']);
  t.deepEqual(entries(volumeDir('shared')), []);
});

test.serial('images move into the volume, new ones land there, and the volume is held (daemon_storage)', async (t) => {
  ok(t, await call('POST', '/1.0/storage-pools/default/volumes/custom', { name: 'imgs' }), 'volume');
  const res = await setKey('storage.images_volume', 'default/imgs');
  t.is(res.status, 200, res.body);
  t.is((await serverConfig())['storage.images_volume'], 'default/imgs');
  t.deepEqual(entries(volumeDir('imgs')), [fingerprint], 'moved into the volume');
  await emptied(path.join(dataDir, 'images'));

  // Still usable: exported, and unpacked for a new instance.
  const exported = await d.request('GET', `/1.0/images/${fingerprint}/export`);
  t.is(exported.status, 200);
  ok(t, await call('POST', '/1.0/instances', { name: 'c1', source: { type: 'image', alias: 'bb' } }), 'instance from the moved image');

  // A new image lands in the volume.
  const other = buildBusyboxImage('xz');
  const second = await importImage(d, other.unified, 'bb2');
  t.deepEqual(entries(volumeDir('imgs')), [fingerprint, second].sort());
  t.deepEqual(entries(path.join(dataDir, 'images')), []);

  // Held by the daemon.
  const vol = (await d.request('GET', '/1.0/storage-pools/default/volumes/custom/imgs')).json.metadata;
  t.deepEqual(vol.used_by, ['/1.0']);
  const del = await d.request('DELETE', '/1.0/storage-pools/default/volumes/custom/imgs');
  t.is(del.status, 400);
  t.regex(del.json.error, /in use by \/1\.0/);
  t.is((await d.request('POST', '/1.0/storage-pools/default/volumes/custom/imgs', { name: 'renamed' })).status, 400);
  const snap = await call('POST', '/1.0/storage-pools/default/volumes/custom/imgs/snapshots', { name: 's0' });
  t.true(snap.status === 400 || snap.op?.status === 'Failure', `snapshot refused: ${JSON.stringify(snap.json)}`);
  const twice = await setKey('storage.backups_volume', 'default/imgs');
  t.is(twice.status, 400);
  t.regex(twice.json.error, /already holds the daemon's images/);
  t.false('storage.backups_volume' in (await serverConfig()));
  // An instance cannot take it either while it is held (attached: it would be in use by two).
  await d.request('DELETE', `/1.0/images/${second}`);
});

test.serial('backups land in the backups volume and export from there (daemon_storage)', async (t) => {
  ok(t, await call('POST', '/1.0/storage-pools/default/volumes/custom', { name: 'bks' }), 'volume');
  ok(t, await call('POST', '/1.0/instances/c1/backups', { name: 'early' }), 'backup before the move');
  t.true(existsSync(path.join(dataDir, 'backups', 'instances', 'c1', 'early')));
  t.is((await setKey('storage.backups_volume', 'default/bks')).status, 200);
  t.true(existsSync(path.join(volumeDir('bks'), 'instances', 'c1', 'early')), 'moved with the rest');
  await emptied(path.join(dataDir, 'backups'));

  ok(t, await call('POST', '/1.0/instances/c1/backups', { name: 'late' }), 'backup after the move');
  t.true(existsSync(path.join(volumeDir('bks'), 'instances', 'c1', 'late')));
  const exported = await d.request('GET', '/1.0/instances/c1/backups/late/export');
  t.is(exported.status, 200);
  t.true(exported.body.length > 1000);

  ok(t, await call('POST', '/1.0/storage-pools/default/volumes/custom', { name: 'data' }), 'data volume');
  ok(t, await call('POST', '/1.0/storage-pools/default/volumes/custom/data/backups', { name: 'b0' }), 'volume backup');
  t.true(existsSync(path.join(volumeDir('bks'), 'custom', 'default', 'default_data', 'b0')));
});

test.serial('a restart keeps both volumes in use', async (t) => {
  await d.stop();
  d = await startDaemon({ dir: dataDir, plugins: 'edge' });
  const config = await serverConfig();
  t.is(config['storage.images_volume'], 'default/imgs');
  t.is(config['storage.backups_volume'], 'default/bks');
  t.deepEqual(entries(volumeDir('imgs')), [fingerprint], 'the boot cleanup keeps the image files');
  t.is((await d.request('GET', `/1.0/images/${fingerprint}/export`)).status, 200);
  t.deepEqual((await d.request('GET', '/1.0/instances/c1/backups')).json.metadata.sort(), ['/1.0/instances/c1/backups/early', '/1.0/instances/c1/backups/late']);
  t.is((await d.request('GET', '/1.0/instances/c1/backups/early/export')).status, 200);
});

test.serial('unset moves the files back to the data dir and frees the volume', async (t) => {
  t.is((await setKey('storage.images_volume', '')).status, 200);
  t.false('storage.images_volume' in (await serverConfig()));
  t.deepEqual(entries(path.join(dataDir, 'images')), [fingerprint]);
  await emptied(volumeDir('imgs'));
  t.deepEqual((await d.request('GET', '/1.0/storage-pools/default/volumes/custom/imgs')).json.metadata.used_by, []);
  ok(t, await call('DELETE', '/1.0/storage-pools/default/volumes/custom/imgs'), 'delete once free');
  ok(t, await call('POST', '/1.0/instances', { name: 'c2', source: { type: 'image', alias: 'bb' } }), 'instance from the image moved back');

  t.is((await setKey('storage.backups_volume', '')).status, 200);
  t.true(existsSync(path.join(dataDir, 'backups', 'instances', 'c1', 'late')));
  t.true(existsSync(path.join(dataDir, 'backups', 'custom', 'default', 'default_data', 'b0')));
  await emptied(volumeDir('bks'));
  t.is((await d.request('GET', '/1.0/instances/c1/backups/late/export')).status, 200);
});

test.serial('a volume whose pool is missing at start: the daemon boots, warns, and refuses image file access', async (t) => {
  const source = mkdtempSync(path.join(tmpdir(), 'corral-daemon-storage-pool-'));
  t.teardown(() => rmSync(source, { recursive: true, force: true }));
  ok(t, await call('POST', '/1.0/storage-pools', { name: 'far', driver: 'dir', config: { source } }), 'pool');
  ok(t, await call('POST', '/1.0/storage-pools/far/volumes/custom', { name: 'imgs' }), 'volume');
  t.is((await setKey('storage.images_volume', 'far/imgs')).status, 200);
  t.deepEqual(entries(path.join(source, 'custom', 'default_imgs')), [fingerprint]);

  await d.stop();
  renameSync(source, `${source}.away`);
  t.teardown(() => rmSync(`${source}.away`, { recursive: true, force: true }));
  d = await startDaemon({ dir: dataDir, plugins: 'edge' });
  await waitFor(async () => ((await d.request('GET', '/1.0/warnings?recursion=1')).json.metadata ?? [])
    .some((w: any) => /holding the daemon's images is unavailable/.test(w.last_message)), 10000, 'the warning');
  const exported = await d.request('GET', `/1.0/images/${fingerprint}/export`);
  t.is(exported.status, 500);
  t.regex(exported.json.error, /far\/imgs.*unavailable/);
  t.is((await d.request('GET', `/1.0/images/${fingerprint}`)).status, 200, 'records still listed');
  const moved = await setKey('storage.images_volume', '');
  t.is(moved.status, 400, 'no move out of an unavailable volume');
  t.is((await serverConfig())['storage.images_volume'], 'far/imgs');

  await d.stop();
  renameSync(`${source}.away`, source);
  mkdirSync(source, { recursive: true });
  d = await startDaemon({ dir: dataDir, plugins: 'edge' });
  t.is((await d.request('GET', `/1.0/images/${fingerprint}/export`)).status, 200, 'back once the pool is');
  t.is((await setKey('storage.images_volume', '')).status, 200);
  t.deepEqual(entries(path.join(dataDir, 'images')), [fingerprint]);
});
