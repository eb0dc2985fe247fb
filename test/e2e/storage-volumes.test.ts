/**
 * Custom storage volumes through the real `lxc` client on dir pools: create/list/show/edit/set/get,
 * rename, copy and move between pools and projects, state, attach to a container, refusals.
 */
import test from 'ava';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { projectRoot, type Daemon } from '../helpers/daemon.js';
import { startWithImage, stopImageDaemons } from '../helpers/image-daemon.js';
import { lxc, lxcOk, lxcWithInput, python } from '../helpers/clients.js';

let d: Daemon;

const run = (t: any, ...args: string[]) => lxcOk(t, d.socket, ...args);
const customDir = (pool: string, dirName: string) => path.join(d.dir, 'storage-pools', pool, 'custom', dirName);

test.before(async () => {
  // The full set: projects take part (volumes moved between projects).
  d = await startWithImage({ plugins: 'full' });
});

test.after.always(stopImageDaemons);

test.serial('lxc storage volume create/list/show/set/get/unset/edit/info and the API view (storage_volume_state)', async (t) => {
  t.regex(await run(t, 'storage', 'volume', 'create', 'default', 'v1', 'user.team=blue'), /v1 created/);
  t.true(statSync(customDir('default', 'default_v1')).isDirectory(), 'the reference layout: custom/<project>_<name>');
  const listed = JSON.parse(await run(t, 'storage', 'volume', 'list', 'default', '--format', 'json'));
  const v1 = listed.find((v: any) => v.name === 'v1');
  t.like(v1, { type: 'custom', content_type: 'filesystem', project: 'default', location: 'none', used_by: [], config: { 'user.team': 'blue' } });

  await run(t, 'storage', 'volume', 'set', 'default', 'v1', 'size', '1GiB');
  t.is((await run(t, 'storage', 'volume', 'get', 'default', 'v1', 'size')).trim(), '1GiB');
  await run(t, 'storage', 'volume', 'unset', 'default', 'v1', 'user.team');
  const edited = await lxcWithInput(d.socket, 'description: my data\nconfig:\n  size: 2GiB\n', 'storage', 'volume', 'edit', 'default', 'v1');
  t.is(edited.status, 0, edited.stderr);
  const shown = await run(t, 'storage', 'volume', 'show', 'default', 'v1');
  t.regex(shown, /description: my data/);
  t.regex(shown, /size: 2GiB/);
  t.notRegex(shown, /user\.team/);

  const bad = await lxc(d.socket, 'storage', 'volume', 'set', 'default', 'v1', 'size', 'lots');
  t.not(bad.status, 0);
  t.regex(bad.stderr, /size/);
  const unknown = await lxc(d.socket, 'storage', 'volume', 'set', 'default', 'v1', 'bogus.key', '1');
  t.not(unknown.status, 0);
  t.regex(unknown.stderr, /bogus\.key/);

  writeFileSync(path.join(customDir('default', 'default_v1'), 'data'), Buffer.alloc(64 * 1024, 1));
  const state = await d.request('GET', '/1.0/storage-pools/default/volumes/custom/v1/state');
  t.is(state.status, 200);
  t.true(state.json.metadata.usage.used >= 64 * 1024, JSON.stringify(state.json.metadata));
  t.regex(await run(t, 'storage', 'volume', 'info', 'default', 'v1'), /Name: v1/);

  // ETag on the volume: a stale If-Match is refused.
  const got = await d.request('GET', '/1.0/storage-pools/default/volumes/custom/v1');
  t.truthy(got.headers.etag);
  const stale = await d.request('PUT', '/1.0/storage-pools/default/volumes/custom/v1', { config: {}, description: 'x' }, { 'If-Match': '"nope"' });
  t.is(stale.status, 412);
  const patched = await d.request('PATCH', '/1.0/storage-pools/default/volumes/custom/v1', { config: { 'user.k': 'v' } }, { 'If-Match': got.headers.etag as string });
  t.is(patched.status, 200, patched.body);
  t.like((await d.request('GET', '/1.0/storage-pools/default/volumes/custom/v1')).json.metadata.config, { size: '2GiB', 'user.k': 'v' });
});

test.serial('bad names and sizes get clear 400s and nothing is created', async (t) => {
  const before = readdirSync(path.join(d.dir, 'storage-pools', 'default', 'custom')).sort();
  for (const [name, message] of [['a/b', /slash/], ['a b', /white space/], ['..', /\.\./], ['x'.repeat(200), /at most/]] as const) {
    const res = await d.request('POST', '/1.0/storage-pools/default/volumes/custom', { name });
    t.is(res.status, 400, name);
    t.regex(res.json.error, message);
  }
  const size = await d.request('POST', '/1.0/storage-pools/default/volumes/custom', { name: 'sz', config: { size: 'ten' } });
  t.is(size.status, 400);
  t.regex(size.json.error, /size/);
  const type = await d.request('POST', '/1.0/storage-pools/default/volumes/custom', { name: 'ct', content_type: 'tape' });
  t.is(type.status, 400);
  t.deepEqual(readdirSync(path.join(d.dir, 'storage-pools', 'default', 'custom')).sort(), before);
  const dup = await lxc(d.socket, 'storage', 'volume', 'create', 'default', 'v1');
  t.not(dup.status, 0);
  t.regex(dup.stderr, /already exists/);
});

test.serial('lxc storage volume rename, copy (with --volume-only, --refresh), move between pools and projects (storage_api_volume_rename, storage_api_local_volume_handling, storage_api_project, custom_volume_refresh)', async (t) => {
  await run(t, 'storage', 'create', 'other', 'dir');
  await run(t, 'storage', 'volume', 'create', 'default', 'src');
  writeFileSync(path.join(customDir('default', 'default_src'), 'hello'), 'one');

  await run(t, 'storage', 'volume', 'rename', 'default', 'src', 'src2');
  t.false(existsSync(customDir('default', 'default_src')));
  t.is(readFileSync(path.join(customDir('default', 'default_src2'), 'hello'), 'utf8'), 'one');

  await run(t, 'storage', 'volume', 'copy', 'default/src2', 'default/copy1');
  t.is(readFileSync(path.join(customDir('default', 'default_copy1'), 'hello'), 'utf8'), 'one');
  await run(t, 'storage', 'volume', 'copy', 'default/src2', 'other/copy2', '--volume-only');
  t.is(readFileSync(path.join(customDir('other', 'default_copy2'), 'hello'), 'utf8'), 'one');

  writeFileSync(path.join(customDir('default', 'default_src2'), 'hello'), 'two');
  await run(t, 'storage', 'volume', 'copy', 'default/src2', 'other/copy2', '--refresh');
  t.is(readFileSync(path.join(customDir('other', 'default_copy2'), 'hello'), 'utf8'), 'two', 'refresh brought the new content');

  await run(t, 'storage', 'volume', 'move', 'default/copy1', 'other/moved');
  t.false(existsSync(customDir('default', 'default_copy1')));
  t.is(readFileSync(path.join(customDir('other', 'default_moved'), 'hello'), 'utf8'), 'one');
  const otherList = JSON.parse(await run(t, 'storage', 'volume', 'list', 'other', '--format', 'json')).map((v: any) => v.name).sort();
  t.deepEqual(otherList, ['copy2', 'moved']);

  await run(t, 'project', 'create', 'p1');
  await run(t, 'storage', 'volume', 'move', 'other/moved', 'other/moved', '--target-project', 'p1');
  t.true(existsSync(customDir('other', 'p1_moved')));
  const inP1 = JSON.parse(await run(t, 'storage', 'volume', 'list', 'other', '--format', 'json', '--project', 'p1')).map((v: any) => v.name);
  t.deepEqual(inP1, ['moved']);
  await run(t, 'storage', 'volume', 'copy', 'other/moved', 'default/back', '--project', 'p1', '--target-project', 'default');
  t.is(readFileSync(path.join(customDir('default', 'default_back'), 'hello'), 'utf8'), 'one');
  const p1Project = await lxc(d.socket, 'project', 'delete', 'p1');
  t.not(p1Project.status, 0, 'a project holding a volume is not deleted');

  for (const [pool, name, project] of [['other', 'moved', 'p1'], ['other', 'copy2', 'default'], ['default', 'back', 'default'], ['default', 'src2', 'default']]) {
    await run(t, 'storage', 'volume', 'delete', pool!, name!, '--project', project!);
  }
  await run(t, 'project', 'delete', 'p1');
  await run(t, 'storage', 'delete', 'other');
});

test.serial('lxc storage volume attach/detach on a container; a volume in use is not deleted; block volumes are refused for containers (custom_block_volumes)', async (t) => {
  await run(t, 'storage', 'volume', 'create', 'default', 'shared');
  writeFileSync(path.join(customDir('default', 'default_shared'), 'note'), 'from the host');
  await run(t, 'init', 'bb', 'c1');
  await run(t, 'storage', 'volume', 'attach', 'default', 'shared', 'c1', '/mnt/shared');
  const dev = (await d.request('GET', '/1.0/instances/c1')).json.metadata.devices.shared;
  t.deepEqual(dev, { type: 'disk', pool: 'default', source: 'shared', path: '/mnt/shared' });
  await run(t, 'start', 'c1');
  t.is((await run(t, 'exec', 'c1', '--', 'cat', '/mnt/shared/note')).trim(), 'from the host');
  await run(t, 'exec', 'c1', '--', 'sh', '-c', 'echo back > /mnt/shared/reply');
  t.is(readFileSync(path.join(customDir('default', 'default_shared'), 'reply'), 'utf8').trim(), 'back');

  const vol = (await d.request('GET', '/1.0/storage-pools/default/volumes/custom/shared')).json.metadata;
  t.deepEqual(vol.used_by, ['/1.0/instances/c1']);
  const del = await lxc(d.socket, 'storage', 'volume', 'delete', 'default', 'shared');
  t.not(del.status, 0);
  t.regex(del.stderr, /in use by \/1\.0\/instances\/c1/);
  const ren = await d.request('POST', '/1.0/storage-pools/default/volumes/custom/shared', { name: 'renamed' });
  t.is(ren.status, 400);
  t.true(existsSync(customDir('default', 'default_shared')));

  await run(t, 'storage', 'volume', 'create', 'default', 'blk', '--type=block', 'size=16MiB');
  const file = path.join(customDir('default', 'default_blk'), 'root.img');
  t.is(statSync(file).size, 16 * 2 ** 20);
  t.true(statSync(file).blocks * 512 < 16 * 2 ** 20, 'sparse');
  t.is((await d.request('GET', '/1.0/storage-pools/default/volumes/custom/blk')).json.metadata.content_type, 'block');
  const blk = await lxc(d.socket, 'storage', 'volume', 'attach', 'default', 'blk', 'c1', '/mnt/blk');
  t.not(blk.status, 0);
  t.regex(blk.stderr, /block volume "blk" cannot be attached to a container/);

  // A missing volume is refused at attach time.
  const missing = await lxc(d.socket, 'config', 'device', 'add', 'c1', 'nope', 'disk', 'pool=default', 'source=ghost', 'path=/mnt/ghost');
  t.not(missing.status, 0);
  t.regex(missing.stderr, /ghost/);

  await run(t, 'stop', 'c1', '--force');
  await run(t, 'storage', 'volume', 'detach', 'default', 'shared', 'c1');
  t.deepEqual((await d.request('GET', '/1.0/storage-pools/default/volumes/custom/shared')).json.metadata.used_by, []);
  await run(t, 'storage', 'volume', 'delete', 'default', 'shared');
  await run(t, 'storage', 'volume', 'delete', 'default', 'blk');
  t.false(existsSync(customDir('default', 'default_shared')));

  // Instance volumes are listed with their owners.
  const containers = JSON.parse(await run(t, 'storage', 'volume', 'list', 'default', '--format', 'json')).filter((v: any) => v.type === 'container');
  t.like(containers.find((v: any) => v.name === 'c1'), { used_by: ['/1.0/instances/c1'] });
  await run(t, 'delete', 'c1', '--force');
});

test.serial('root disk size and size.state are validated', async (t) => {
  await run(t, 'init', 'bb', 'c2');
  const bad = await lxc(d.socket, 'config', 'device', 'override', 'c2', 'root', 'size=huge');
  t.not(bad.status, 0);
  t.regex(bad.stderr, /huge/);
  await run(t, 'config', 'device', 'override', 'c2', 'root', 'size=1GiB', 'size.state=100MiB');
  t.like((await d.request('GET', '/1.0/instances/c2')).json.metadata.devices.root, { size: '1GiB', 'size.state': '100MiB' });
  const notRoot = await lxc(d.socket, 'config', 'device', 'add', 'c2', 'data', 'disk', 'source=/tmp', 'path=/mnt/tmp', 'size=1GiB');
  t.not(notRoot.status, 0);
  t.regex(notRoot.stderr, /root disk only/);
  await run(t, 'delete', 'c2');
});

test.serial('lxc storage volume snapshot/restore/show/delete, snapshot rename and expiry through the API (storage_api_volume_snapshots, custom_volume_snapshot_expiry)', async (t) => {
  await run(t, 'storage', 'volume', 'create', 'default', 'sv', 'snapshots.expiry=1d');
  const file = path.join(customDir('default', 'default_sv'), 'f');
  writeFileSync(file, 'first');
  await run(t, 'storage', 'volume', 'snapshot', 'default', 'sv', 'one');
  writeFileSync(file, 'second');
  await run(t, 'storage', 'volume', 'snapshot', 'default', 'sv');
  const snaps = (await d.request('GET', '/1.0/storage-pools/default/volumes/custom/sv/snapshots?recursion=1')).json.metadata;
  t.deepEqual(snaps.map((s: any) => s.name), ['one', 'snap0'], 'the unnamed one follows snapshots.pattern');
  const expires = Date.parse(snaps[0].expires_at);
  t.true(Math.abs(expires - (Date.now() + 86400_000)) < 120_000, snaps[0].expires_at);
  t.regex(await run(t, 'storage', 'volume', 'show', 'default', 'sv/one'), /name: one/);

  await run(t, 'storage', 'volume', 'restore', 'default', 'sv', 'one');
  t.is(readFileSync(file, 'utf8'), 'first');

  const ren = await d.request('POST', '/1.0/storage-pools/default/volumes/custom/sv/snapshots/snap0', { name: 'two' });
  t.is(ren.status, 202);
  await d.request('GET', `${ren.json.operation}/wait`);
  const put = await d.request('PUT', '/1.0/storage-pools/default/volumes/custom/sv/snapshots/two', { description: 'kept', expires_at: '2040-01-02T03:04:05Z' });
  t.is(put.status, 200, put.body);
  t.like((await d.request('GET', '/1.0/storage-pools/default/volumes/custom/sv/snapshots/two')).json.metadata, { description: 'kept', expires_at: '2040-01-02T03:04:05Z' });
  const badName = await d.request('POST', '/1.0/storage-pools/default/volumes/custom/sv/snapshots', { name: 'a/b' });
  t.is(badName.status, 400);

  await run(t, 'storage', 'volume', 'copy', 'default/sv', 'default/svcopy');
  t.deepEqual((await d.request('GET', '/1.0/storage-pools/default/volumes/custom/svcopy/snapshots')).json.metadata.length, 2, 'a copy takes the snapshots');
  await run(t, 'storage', 'volume', 'copy', 'default/sv/one', 'default/fromsnap');
  t.is(readFileSync(path.join(customDir('default', 'default_fromsnap'), 'f'), 'utf8'), 'first');

  await run(t, 'storage', 'volume', 'delete', 'default', 'sv/one');
  t.deepEqual((await d.request('GET', '/1.0/storage-pools/default/volumes/custom/sv/snapshots')).json.metadata,
    ['/1.0/storage-pools/default/volumes/custom/sv/snapshots/two']);
  for (const v of ['sv', 'svcopy', 'fromsnap']) await run(t, 'storage', 'volume', 'delete', 'default', v);
  t.false(existsSync(path.join(d.dir, 'storage-pools', 'default', 'custom-snapshots', 'default_sv')));
});

test.serial('pylxd: storage pools and custom volumes (create, save, get, list, delete)', async (t) => {
  const res = await python(path.join(projectRoot, 'test', 'e2e', 'pylxd_volumes.py'), [d.socket]);
  t.is(res.status, 0, res.stderr);
  const seen = JSON.parse(res.stdout.trim().split('\n').pop()!);
  t.deepEqual(seen.pools, ['default']);
  t.deepEqual(seen.config, { 'user.x': '1', 'user.y': '2' }, 'save() sent the changed config');
  t.true(seen.names.includes('pyvol'));
  t.false(seen.after_delete.includes('pyvol'));
});
