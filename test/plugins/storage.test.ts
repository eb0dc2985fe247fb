/**
 * The storage family and the dir driver: pools through the real lxc client and the API of a real
 * daemon, pools that cannot be mounted at boot, and the volume helpers driven through the service.
 */
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync, linkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startDaemon, stopDaemons, collect, waitFor, type Daemon } from '../helpers/daemon.js';
import { lxc, lxcWithInput } from '../helpers/clients.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { startTestKernel, type TestKernel } from '../../sdk/testing/index.js';
import { StorageServiceRef, type StorageService, type VolumeRef } from '../../sdk/index.js';

const PLUGINS = 'warnings,storage,storage-dir,profiles,resources';
const LAYOUT = ['containers', 'containers-snapshots', 'custom', 'custom-snapshots', 'images', 'virtual-machines', 'virtual-machines-snapshots'];

let d: Daemon;
const scratch = mkdtempSync(path.join(tmpdir(), 'corral-storage-test-'));

async function ok(socket: string, ...args: string[]): Promise<string> {
  const run = await lxc(socket, ...args);
  if (run.status !== 0) throw new Error(`lxc ${args.join(' ')} failed: ${run.stderr}`);
  return run.stdout;
}

test.before(async () => {
  d = await startDaemon({ plugins: PLUGINS });
});

test.after.always(async () => {
  await stopDaemons();
  rmSync(scratch, { recursive: true, force: true });
});

test.serial('GET /1.0 lists the storage drivers (server_supported_storage_drivers) and the drivers in use', async (t) => {
  const info = (await d.request('GET', '/1.0')).json.metadata;
  t.true(info.api_extensions.includes('storage'));
  t.true(info.api_extensions.includes('server_supported_storage_drivers'));
  t.deepEqual(info.environment.storage_supported_drivers, [{ Name: 'dir', Version: '1', Remote: false }]);
  t.is(info.environment.storage, '');
  await ok(d.socket, 'storage', 'create', 'envpool', 'dir');
  const after = (await d.request('GET', '/1.0')).json.metadata.environment;
  t.is(after.storage, 'dir');
  t.is(after.storage_version, '1');
  await ok(d.socket, 'storage', 'delete', 'envpool');
  t.is((await d.request('GET', '/1.0')).json.metadata.environment.storage, '');
});

test.serial('a dir pool through lxc: create, list, show, set/get/unset, edit, info, delete', async (t) => {
  t.regex(await ok(d.socket, 'storage', 'create', 'p1', 'dir'), /p1 created/);
  const source = path.join(d.dir, 'storage-pools', 'p1');
  t.deepEqual(readdirSync(source).sort(), LAYOUT);

  const listed = JSON.parse(await ok(d.socket, 'storage', 'list', '--format', 'json'));
  t.is(listed.length, 1);
  t.like(listed[0], { name: 'p1', driver: 'dir', status: 'Created', description: '', used_by: [], locations: ['none'], config: { source } });

  const shown = await ok(d.socket, 'storage', 'show', 'p1');
  t.regex(shown, /driver: dir/);
  t.regex(shown, new RegExp(`source: ${source}`));

  await ok(d.socket, 'storage', 'set', 'p1', 'volume.size', '5GiB');
  t.is((await ok(d.socket, 'storage', 'get', 'p1', 'volume.size')).trim(), '5GiB');
  await ok(d.socket, 'storage', 'set', 'p1', 'user.team', 'blue');
  await ok(d.socket, 'storage', 'unset', 'p1', 'volume.size');
  const cfg = (await d.request('GET', '/1.0/storage-pools/p1')).json.metadata.config;
  t.deepEqual(cfg, { source, 'user.team': 'blue' });

  const bad = await lxc(d.socket, 'storage', 'set', 'p1', 'bogus.key', '1');
  t.not(bad.status, 0);
  t.regex(bad.stderr, /bogus\.key/);

  const edited = await lxcWithInput(d.socket, `description: edited pool\nconfig:\n  source: ${source}\n  user.team: red\n`, 'storage', 'edit', 'p1');
  t.is(edited.status, 0, edited.stderr);
  const pool = (await d.request('GET', '/1.0/storage-pools/p1')).json.metadata;
  t.is(pool.description, 'edited pool');
  t.deepEqual(pool.config, { source, 'user.team': 'red' });

  const info = await ok(d.socket, 'storage', 'info', 'p1');
  t.regex(info, /total space/i);

  const res = (await d.request('GET', '/1.0/storage-pools/p1/resources')).json.metadata;
  t.true(res.space.total > 0 && res.space.used > 0 && res.space.used <= res.space.total);
  t.true(res.inodes.total > 0 && res.inodes.used > 0);

  await ok(d.socket, 'storage', 'delete', 'p1');
  t.false(existsSync(source));
  t.deepEqual(JSON.parse(await ok(d.socket, 'storage', 'list', '--format', 'json')), []);
});

test.serial('a given source: an empty directory is used and emptied on delete, a new path is made and removed', async (t) => {
  const given = path.join(scratch, 'given');
  mkdirSync(given);
  await ok(d.socket, 'storage', 'create', 'given', 'dir', `source=${given}`);
  t.deepEqual(readdirSync(given).sort(), LAYOUT);
  await ok(d.socket, 'storage', 'delete', 'given');
  t.true(existsSync(given));
  t.deepEqual(readdirSync(given), []);

  const fresh = path.join(scratch, 'fresh', 'deeper');
  await ok(d.socket, 'storage', 'create', 'fresh', 'dir', `source=${fresh}`);
  t.deepEqual(readdirSync(fresh).sort(), LAYOUT);
  await ok(d.socket, 'storage', 'delete', 'fresh');
  t.false(existsSync(fresh));

  const full = path.join(scratch, 'full');
  mkdirSync(full);
  writeFileSync(path.join(full, 'keep-me'), 'data');
  const file = path.join(scratch, 'a-file');
  writeFileSync(file, 'x');
  for (const [source, message] of [[full, /isn't empty/], [file, /isn't a directory/], ['relative/path', /absolute/]] as const) {
    const res = await d.request('POST', '/1.0/storage-pools', { name: 'srcbad', driver: 'dir', config: { source } });
    t.is(res.status, 400, source);
    t.regex(res.json.error, message);
  }
  t.deepEqual(readdirSync(full), ['keep-me']);
  t.is((await d.request('GET', '/1.0/storage-pools/srcbad')).status, 404);
});

test.serial('bad requests get the right status and create nothing', async (t) => {
  const cases: [unknown, number, RegExp][] = [
    [{ name: 'a/b', driver: 'dir' }, 400, /slashes/],
    [{ name: 'a b', driver: 'dir' }, 400, /white space/],
    [{ name: '', driver: 'dir' }, 400, /No name/],
    [{ name: '..', driver: 'dir' }, 400, /Invalid storage pool name/],
    [{ name: 'nodriver' }, 400, /No driver/],
    [{ name: 'x1', driver: 'warpfs' }, 400, /not supported/],
    [{ name: 'x2', driver: 'zfs' }, 400, /not enabled/],
    [{ name: 'x3', driver: 'dir', config: { 'no.such.key': '1' } }, 400, /no\.such\.key/],
    [{ name: 'x4', driver: 'dir', config: { size: '1GiB' } }, 400, /size/],
    [{ name: 'x5', driver: 'dir', config: { 'volume.size': 'lots' } }, 400, /volume\.size/],
    [{ name: 'x6', driver: 'dir', config: 'nope' }, 400, /config/],
  ];
  for (const [body, status, message] of cases) {
    const res = await d.request('POST', '/1.0/storage-pools', body);
    t.is(res.status, status, JSON.stringify(body));
    t.is(res.json.type, 'error');
    t.regex(res.json.error, message, JSON.stringify(body));
  }
  t.deepEqual((await d.request('GET', '/1.0/storage-pools')).json.metadata, []);
  t.deepEqual(readdirSync(path.join(d.dir, 'storage-pools')), []);

  t.is((await d.request('POST', '/1.0/storage-pools', { name: 'dup', driver: 'dir' })).status, 200);
  const dup = await d.request('POST', '/1.0/storage-pools', { name: 'dup', driver: 'dir' });
  t.is(dup.status, 409);
  t.regex(dup.json.error, /already exists/);

  // Concurrent creations of one name: exactly one wins.
  const racing = await Promise.all([1, 2, 3].map(() => d.request('POST', '/1.0/storage-pools', { name: 'race', driver: 'dir' })));
  t.deepEqual(racing.map((r) => r.status).sort(), [200, 409, 409]);

  for (const [method, url] of [['GET', '/1.0/storage-pools/missing'], ['DELETE', '/1.0/storage-pools/missing'], ['PUT', '/1.0/storage-pools/missing'], ['GET', '/1.0/storage-pools/missing/resources']]) {
    const res = await d.request(method, url, method === 'PUT' ? { config: {} } : undefined);
    t.is(res.status, 404, `${method} ${url}`);
    t.regex(res.json.error, /Storage pool not found/);
  }
  for (const name of ['dup', 'race']) t.is((await d.request('DELETE', `/1.0/storage-pools/${name}`)).status, 200);
});

test.serial('ETag, If-Match, PUT and PATCH of a pool', async (t) => {
  await d.request('POST', '/1.0/storage-pools', { name: 'etag', driver: 'dir', description: 'first', config: { 'user.a': '1' } });
  const got = await d.request('GET', '/1.0/storage-pools/etag');
  const etag = got.headers.etag as string;
  t.truthy(etag);
  const source = got.json.metadata.config.source;

  const stale = await d.request('PUT', '/1.0/storage-pools/etag', { description: 'x', config: { source } }, { 'If-Match': '"not-the-etag"' });
  t.is(stale.status, 412);
  const put = await d.request('PUT', '/1.0/storage-pools/etag', { description: 'second', config: { source, 'user.b': '2' } }, { 'If-Match': etag });
  t.is(put.status, 200, put.body);
  t.is((await d.request('PUT', '/1.0/storage-pools/etag', { description: 'x', config: { source } }, { 'If-Match': etag })).status, 412);

  // PATCH merges config and keeps what it does not name.
  t.is((await d.request('PATCH', '/1.0/storage-pools/etag', { config: { 'user.c': '3' } })).status, 200);
  let pool = (await d.request('GET', '/1.0/storage-pools/etag')).json.metadata;
  t.is(pool.description, 'second');
  t.deepEqual(pool.config, { source, 'user.b': '2', 'user.c': '3' });

  // A config without `source` keeps it; a different source is refused.
  t.is((await d.request('PUT', '/1.0/storage-pools/etag', { description: 'third', config: {} })).status, 200);
  pool = (await d.request('GET', '/1.0/storage-pools/etag')).json.metadata;
  t.deepEqual(pool.config, { source });
  const moved = await d.request('PUT', '/1.0/storage-pools/etag', { config: { source: '/elsewhere' } });
  t.is(moved.status, 400);
  t.regex(moved.json.error, /source/);
  const unknown = await d.request('PATCH', '/1.0/storage-pools/etag', { config: { 'bad.key': 'x' } });
  t.is(unknown.status, 400);
  t.deepEqual((await d.request('GET', '/1.0/storage-pools/etag')).json.metadata.config, { source });

  // Recursion and filter on the collection.
  await d.request('POST', '/1.0/storage-pools', { name: 'other', driver: 'dir', description: 'second pool' });
  t.deepEqual((await d.request('GET', '/1.0/storage-pools')).json.metadata, ['/1.0/storage-pools/etag', '/1.0/storage-pools/other']);
  const filtered = (await d.request('GET', `/1.0/storage-pools?recursion=1&filter=${encodeURIComponent('description eq "second pool"')}`)).json.metadata;
  t.deepEqual(filtered.map((p: any) => p.name), ['other']);
  for (const name of ['etag', 'other']) await d.request('DELETE', `/1.0/storage-pools/${name}`);
});

test.serial('a pool used by a profile cannot be deleted; lifecycle events carry the requestor', async (t) => {
  const ws = await d.websocket('/1.0/events?type=lifecycle');
  const events = collect(ws);
  await ok(d.socket, 'storage', 'create', 'used', 'dir');
  await ok(d.socket, 'storage', 'set', 'used', 'user.x', 'y');
  await ok(d.socket, 'profile', 'device', 'add', 'default', 'root', 'disk', 'path=/', 'pool=used');
  const pool = (await d.request('GET', '/1.0/storage-pools/used')).json.metadata;
  t.deepEqual(pool.used_by, ['/1.0/profiles/default']);

  const refused = await d.request('DELETE', '/1.0/storage-pools/used');
  t.is(refused.status, 400);
  t.regex(refused.json.error, /in use/);
  t.true(existsSync(path.join(d.dir, 'storage-pools', 'used')));

  await ok(d.socket, 'profile', 'device', 'remove', 'default', 'root');
  await ok(d.socket, 'storage', 'delete', 'used');
  await waitFor(() => events.some((e) => e.metadata.action === 'storage-pool-deleted'), 5000, 'the delete event');
  const mine = events.filter((e) => e.metadata.source === '/1.0/storage-pools/used').map((e) => e.metadata);
  t.deepEqual(mine.map((m) => m.action), ['storage-pool-created', 'storage-pool-updated', 'storage-pool-deleted']);
  for (const m of mine) t.like(m.requestor, { protocol: 'unix' });
  ws.close();
});

test.serial('pools that cannot be mounted at boot, or whose driver is absent, are unavailable and the daemon still boots', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-storage-boot-'));
  const vanishing = path.join(scratch, 'vanishing');
  try {
    let daemon = await startDaemon({ plugins: PLUGINS, dir });
    t.is((await daemon.request('POST', '/1.0/storage-pools', { name: 'stays', driver: 'dir' })).status, 200);
    t.is((await daemon.request('POST', '/1.0/storage-pools', { name: 'goes', driver: 'dir', config: { source: vanishing } })).status, 200);
    await daemon.stop();
    rmSync(vanishing, { recursive: true, force: true });

    daemon = await startDaemon({ plugins: PLUGINS, dir });
    const pools = (await daemon.request('GET', '/1.0/storage-pools?recursion=1')).json.metadata;
    t.deepEqual(pools.map((p: any) => [p.name, p.status]), [['goes', 'Unavailable'], ['stays', 'Created']]);
    const warnings = (await daemon.request('GET', '/1.0/warnings?recursion=1')).json.metadata;
    t.true(warnings.some((w: any) => w.entity_url === '/1.0/storage-pools/goes' && /doesn't exist/.test(w.last_message)), JSON.stringify(warnings));
    const res = await daemon.request('GET', '/1.0/storage-pools/goes/resources');
    t.is(res.status, 400);
    t.regex(res.json.error, /unavailable/);
    // Deleting the broken pool is still possible.
    t.is((await daemon.request('DELETE', '/1.0/storage-pools/goes')).status, 200);
    await daemon.stop();

    // Without the dir driver the remaining pool is reported, not lost.
    daemon = await startDaemon({ plugins: 'warnings,storage,profiles', dir });
    const pool = (await daemon.request('GET', '/1.0/storage-pools/stays')).json.metadata;
    t.is(pool.status, 'Unavailable');
    const env = (await daemon.request('GET', '/1.0')).json.metadata.environment;
    t.deepEqual(env.storage_supported_drivers, []);
    const create = await daemon.request('POST', '/1.0/storage-pools', { name: 'nodir', driver: 'dir' });
    t.is(create.status, 400);
    t.regex(create.json.error, /not enabled/);
    await daemon.stop();

    daemon = await startDaemon({ plugins: PLUGINS, dir });
    t.is((await daemon.request('GET', '/1.0/storage-pools/stays')).json.metadata.status, 'Created');
    await daemon.stop();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// ---- The volume helpers, driven through the service of a test kernel. ----

let tk: TestKernel;
let storage: StorageService;
let image: BusyboxImage;
let poolSource: string;

const ct = (name: string, project = 'default'): VolumeRef => ({ type: 'container', project, name });
const untar = (tarball: string) => async (dir: string) => {
  execFileSync('tar', ['-xzf', tarball, '--numeric-owner', '--xattrs', '-C', dir]);
};

test.before(async () => {
  image = buildBusyboxImage('gzip');
  tk = await startTestKernel({ plugins: ['storage', 'storage-dir'] });
  const res = await tk.inject({ method: 'POST', url: '/1.0/storage-pools', payload: { name: 'vp', driver: 'dir' } });
  if (res.statusCode !== 200) throw new Error(res.body);
  storage = tk.kernel.services.get(StorageServiceRef)!;
  poolSource = (await storage.pool('vp')).config.source;
});

test.after.always(async () => {
  await tk?.stop();
  if (image) rmSync(image.dir, { recursive: true, force: true });
});

test.serial('an image is unpacked once per pool and cloned per instance, keeping owners, links and xattrs', async (t) => {
  let unpacks = 0;
  const unpack = async (dir: string) => {
    unpacks++;
    await untar(image.unified)(dir);
    // A hard link pair and an xattr the clone must keep.
    linkSync(path.join(dir, 'rootfs/etc/passwd'), path.join(dir, 'rootfs/etc/passwd.link'));
    execFileSync('setfattr', ['-n', 'user.corral', '-v', 'kept', path.join(dir, 'rootfs/etc/group')]);
  };
  const source = { kind: 'image' as const, fingerprint: 'f1'.repeat(32), project: 'default', unpack };
  const names = ['c1', 'c2', 'c3', 'c4', 'c5'];
  const paths = await Promise.all(names.map((n) => storage.createInstanceVolume('vp', ct(n), source)));
  t.is(unpacks, 1);
  t.deepEqual(paths, names.map((n) => path.join(poolSource, 'containers', n)));
  t.deepEqual(readdirSync(path.join(poolSource, 'images')), ['f1'.repeat(32)]);
  for (const p of paths) {
    t.true(lstatSync(path.join(p, 'rootfs/bin/sh')).isSymbolicLink());
    t.is(statSync(path.join(p, 'rootfs/home/user')).uid, 1000);
    const a = statSync(path.join(p, 'rootfs/etc/passwd'));
    const b = statSync(path.join(p, 'rootfs/etc/passwd.link'));
    t.is(a.ino, b.ino);
    t.is(a.nlink, 2);
    t.is(execFileSync('getfattr', ['--absolute-names', '--only-values', '-n', 'user.corral', path.join(p, 'rootfs/etc/group')], { encoding: 'utf8' }), 'kept');
    t.true(existsSync(path.join(p, 'metadata.yaml')));
  }
  // Instances do not share inodes with the image volume.
  t.not(statSync(path.join(paths[0], 'rootfs/bin/busybox')).ino, statSync(path.join(poolSource, 'images', 'f1'.repeat(32), 'rootfs/bin/busybox')).ino);

  // Clone time of the busybox rootfs (image already unpacked).
  const times: number[] = [];
  for (let i = 0; i < 9; i++) {
    const started = process.hrtime.bigint();
    await storage.createInstanceVolume('vp', ct(`t${i}`), source);
    times.push(Number(process.hrtime.bigint() - started) / 1e6);
  }
  // The floor: the same copy run straight from here, without the daemon in between.
  const floor: number[] = [];
  const imageDir = path.join(poolSource, 'images', 'f1'.repeat(32));
  for (let i = 0; i < 9; i++) {
    const started = process.hrtime.bigint();
    execFileSync('cp', ['-a', '--reflink=auto', '--no-target-directory', imageDir, path.join(scratch, `floor${i}`)]);
    floor.push(Number(process.hrtime.bigint() - started) / 1e6);
  }
  const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
  t.log(`busybox rootfs clone (${readdirSync(path.join(imageDir, 'rootfs'), { recursive: true }).length} entries): service median ${median(times).toFixed(1)} ms; bare cp -a median ${median(floor).toFixed(1)} ms`);
  for (let i = 0; i < 9; i++) {
    await storage.deleteVolume('vp', ct(`t${i}`));
    rmSync(path.join(scratch, `floor${i}`), { recursive: true });
  }
  for (const n of names) await storage.deleteVolume('vp', ct(n));
  t.deepEqual(readdirSync(path.join(poolSource, 'containers')), []);
  t.is(unpacks, 1);
});

test.serial('a failed unpack or clone leaves nothing behind', async (t) => {
  const fingerprint = 'ba'.repeat(32);
  const failing = {
    kind: 'image' as const, fingerprint, project: 'default',
    unpack: async (dir: string) => {
      writeFileSync(path.join(dir, 'half-written'), 'x');
      throw new Error('the tarball is corrupt');
    },
  };
  await t.throwsAsync(storage.createInstanceVolume('vp', ct('broken'), failing), { message: /corrupt/ });
  t.false(readdirSync(path.join(poolSource, 'images')).some((e) => e.startsWith(fingerprint)));
  t.false(existsSync(path.join(poolSource, 'containers', 'broken')));

  // A scratch unpack left by a crash is discarded and the unpack redone.
  const leftover = path.join(poolSource, 'images', `${fingerprint}.unpacking`);
  mkdirSync(path.join(leftover, 'rootfs'), { recursive: true });
  const good = { ...failing, unpack: untar(image.unified) };
  await storage.createInstanceVolume('vp', ct('fixed'), good);
  t.false(existsSync(leftover));
  t.true(existsSync(path.join(poolSource, 'images', fingerprint, 'rootfs/bin/busybox')));

  // The target exists already: refused, and the existing volume is left alone.
  await t.throwsAsync(storage.createInstanceVolume('vp', ct('fixed'), good), { message: /already exists/ });
  t.true(existsSync(path.join(poolSource, 'containers', 'fixed', 'rootfs/bin/busybox')));

  await storage.deleteImageVolumes(fingerprint);
  t.false(existsSync(path.join(poolSource, 'images', fingerprint)));
  t.true(existsSync(path.join(poolSource, 'containers', 'fixed', 'rootfs/bin/busybox')));
  await storage.deleteVolume('vp', ct('fixed'));
});

test.serial('empty and copied volumes, projects, rename, list, delete', async (t) => {
  const empty = await storage.createInstanceVolume('vp', ct('blank', 'proj'), { kind: 'empty' });
  t.is(empty, path.join(poolSource, 'containers', 'proj_blank'));
  t.deepEqual(readdirSync(empty), ['rootfs']);
  t.is(await storage.volumePath('vp', ct('blank', 'proj')), empty);

  writeFileSync(path.join(empty, 'rootfs', 'hello'), 'world');
  await storage.createInstanceVolume('vp', ct('copy'), { kind: 'copy', pool: 'vp', volume: ct('blank', 'proj') });
  t.is(readFileSync(path.join(poolSource, 'containers', 'copy', 'rootfs', 'hello'), 'utf8'), 'world');
  await t.throwsAsync(storage.createInstanceVolume('vp', ct('x'), { kind: 'copy', pool: 'vp', volume: ct('missing') }), { message: /not found/ });
  t.false(existsSync(path.join(poolSource, 'containers', 'x')));

  await storage.renameVolume('vp', ct('copy'), 'renamed');
  t.true(existsSync(path.join(poolSource, 'containers', 'renamed', 'rootfs', 'hello')));
  await t.throwsAsync(storage.renameVolume('vp', ct('renamed'), 'proj_blank'), { message: /already exists/ });
  await t.throwsAsync(storage.renameVolume('vp', ct('renamed'), '../escape'), { message: /Invalid volume name/ });

  t.deepEqual(await storage.listVolumes('vp', 'container'), [ct('blank', 'proj'), ct('renamed')]);
  t.deepEqual(await storage.poolNames(), ['vp']);
  // dir reports no usage for instance volumes (as the reference): a listing would walk every tree.
  t.is(await storage.volumeUsage('vp', ct('renamed')), undefined);

  await storage.deleteVolume('vp', ct('renamed'));
  await storage.deleteVolume('vp', ct('blank', 'proj'));
  await storage.deleteVolume('vp', ct('never-existed'));
  t.deepEqual(await storage.listVolumes('vp', 'container'), []);

  await t.throwsAsync(storage.pool('nope'), { message: /not found/ });
  await t.throwsAsync(storage.createInstanceVolume('nope', ct('a'), { kind: 'empty' }), { message: /not found/ });
});

test.serial('deleting a volume never reaches outside the pool', async (t) => {
  const outside = path.join(scratch, 'outside');
  mkdirSync(outside, { recursive: true });
  writeFileSync(path.join(outside, 'precious'), 'keep');

  // Symlinks inside the volume are removed, not followed.
  const vol = await storage.createInstanceVolume('vp', ct('links'), { kind: 'empty' });
  symlinkSync(outside, path.join(vol, 'rootfs', 'escape-dir'));
  symlinkSync(path.join(outside, 'precious'), path.join(vol, 'rootfs', 'escape-file'));
  await storage.deleteVolume('vp', ct('links'));
  t.false(existsSync(vol));
  t.is(readFileSync(path.join(outside, 'precious'), 'utf8'), 'keep');

  // A symlink in the volume's own place is unlinked.
  symlinkSync(outside, path.join(poolSource, 'containers', 'swapped'));
  await storage.deleteVolume('vp', ct('swapped'));
  t.false(existsSync(path.join(poolSource, 'containers', 'swapped')));
  t.is(readFileSync(path.join(outside, 'precious'), 'utf8'), 'keep');

  // A type directory replaced by a symlink out of the pool is refused.
  mkdirSync(path.join(outside, 'victim'));
  writeFileSync(path.join(outside, 'victim', 'file'), 'keep');
  const images = path.join(poolSource, 'images');
  rmSync(images, { recursive: true });
  symlinkSync(outside, images);
  await t.throwsAsync(storage.deleteVolume('vp', { type: 'image', project: 'default', name: 'victim' }), { message: /inside the pool/ });
  t.is(readFileSync(path.join(outside, 'victim', 'file'), 'utf8'), 'keep');
  rmSync(images);
  mkdirSync(images, { mode: 0o700 });
});

test.serial('a pool in use by what another plugin reports cannot be deleted', async (t) => {
  let users: string[] = ['/1.0/instances/holder'];
  storage.poolUsedBy.add((_project, pool) => (pool === 'vp' ? users : []));
  const refused = await tk.inject({ method: 'DELETE', url: '/1.0/storage-pools/vp' });
  t.is(refused.statusCode, 400);
  t.regex(refused.json.error, /in use/);
  t.deepEqual((await tk.inject({ url: '/1.0/storage-pools/vp' })).json.metadata.used_by, ['/1.0/instances/holder']);
  users = [];
  t.is((await tk.inject({ method: 'DELETE', url: '/1.0/storage-pools/vp' })).statusCode, 200);
  t.false(existsSync(poolSource));
});
