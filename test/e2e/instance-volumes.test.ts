/**
 * Instance and image volumes carry description and config, and pools' `volume.*` keys give new
 * volumes their defaults — through the real `lxc` client, in the flows the reference (LXD 5.0.2)
 * was driven through: set/get/unset/show/edit of `container/<name>`, the keys it refuses,
 * snapshots, copies, renames, backups and imports keeping what the volume carries.
 */
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { projectRoot, type Daemon } from '../helpers/daemon.js';
import { startWithImage, stopImageDaemons } from '../helpers/image-daemon.js';
import { lxc, lxcOk, lxcWithInput, python, lxcRefused } from '../helpers/clients.js';

let d: Daemon;
let work: string;

const run = (t: any, ...args: string[]) => lxcOk(t, d.socket, ...args);
const showVolume = async (t: any, pool: string, name: string) => parse(await run(t, 'storage', 'volume', 'show', pool, name));

const refused = (t: any, ...args: string[]) => lxcRefused(t, d.socket, ...args);

test.before(async () => {
  d = await startWithImage({ plugins: 'full' });
  work = mkdtempSync(path.join(tmpdir(), 'corral-ivol-'));
});

test.after.always(async () => {
  await stopImageDaemons();
  rmSync(work, { recursive: true, force: true });
});

test.serial('lxc storage volume set/get/unset/show/edit on container/<name>, with the keys the reference refuses', async (t) => {
  await run(t, 'init', 'bb', 'c1');
  t.like(await showVolume(t, 'default', 'container/c1'), { config: {}, description: '', name: 'c1', type: 'container', used_by: ['/1.0/instances/c1'] });

  await run(t, 'storage', 'volume', 'set', 'default', 'container/c1', 'user.foo=bar');
  t.is((await run(t, 'storage', 'volume', 'get', 'default', 'container/c1', 'user.foo')).trim(), 'bar');
  await run(t, 'storage', 'volume', 'set', 'default', 'container/c1', 'snapshots.expiry=1d');
  await run(t, 'storage', 'volume', 'set', 'default', 'container/c1', 'snapshots.schedule=@daily');
  await run(t, 'storage', 'volume', 'unset', 'default', 'container/c1', 'snapshots.schedule');
  t.deepEqual((await showVolume(t, 'default', 'container/c1')).config, { 'snapshots.expiry': '1d', 'user.foo': 'bar' });

  const edited = await lxcWithInput(d.socket, 'description: root of c1\nconfig:\n  user.foo: baz\n  snapshots.expiry: 1d\n', 'storage', 'volume', 'edit', 'default', 'container/c1');
  t.is(edited.status, 0, edited.stderr);
  t.like(await showVolume(t, 'default', 'container/c1'), { description: 'root of c1', config: { 'user.foo': 'baz', 'snapshots.expiry': '1d' } });
  const listed = JSON.parse(await run(t, 'storage', 'volume', 'list', 'default', '--format', 'json'));
  t.like(listed.find((v: any) => v.type === 'container' && v.name === 'c1'), { description: 'root of c1', config: { 'user.foo': 'baz' } });

  // What the reference refuses on an instance volume: its size (the root disk device's), security.*, unknown keys, bad values.
  t.regex(await refused(t, 'storage', 'volume', 'set', 'default', 'container/c1', 'size=100MiB'), /size/);
  t.regex(await refused(t, 'storage', 'volume', 'set', 'default', 'container/c1', 'security.shifted=true'), /security\.shifted/);
  t.regex(await refused(t, 'storage', 'volume', 'set', 'default', 'container/c1', 'bogus=1'), /bogus/);
  t.regex(await refused(t, 'storage', 'volume', 'set', 'default', 'container/c1', 'volatile.x=1'), /volatile\.x/);
  t.regex(await refused(t, 'storage', 'volume', 'set', 'default', 'container/c1', 'snapshots.expiry=soon'), /snapshots\.expiry/);
  t.regex(await refused(t, 'storage', 'volume', 'set', 'default', 'container/c1', 'snapshots.schedule=@startup'), /snapshots\.schedule/);
  const bad = await d.request('PUT', '/1.0/storage-pools/default/volumes/container/c1', { config: { size: '1GiB' } });
  t.is(bad.status, 400, 'a client mistake, not a 500');
  t.like(await showVolume(t, 'default', 'container/c1'), { description: 'root of c1', config: { 'user.foo': 'baz', 'snapshots.expiry': '1d' } }, 'refusals changed nothing');

  // ETag: a stale If-Match is refused; PATCH merges.
  const got = await d.request('GET', '/1.0/storage-pools/default/volumes/container/c1');
  t.truthy(got.headers.etag);
  t.is((await d.request('PUT', '/1.0/storage-pools/default/volumes/container/c1', { config: {} }, { 'If-Match': '"stale"' })).status, 412);
  t.is((await d.request('PATCH', '/1.0/storage-pools/default/volumes/container/c1', { config: { 'user.more': '1' } }, { 'If-Match': got.headers.etag as string })).status, 200);
  t.is((await run(t, 'storage', 'volume', 'get', 'default', 'container/c1', 'user.more')).trim(), '1');

  // Still not created, renamed or deleted through the storage API.
  t.regex(await refused(t, 'storage', 'volume', 'delete', 'default', 'container/c1'), /custom/);
  t.regex(await refused(t, 'storage', 'volume', 'rename', 'default', 'container/c1', 'container/c9'), /custom/);
});

test.serial('snapshots, copies, renames keep what the volume carries; a deleted instance leaves no record behind', async (t) => {
  await run(t, 'snapshot', 'c1', 's0');
  t.like(await showVolume(t, 'default', 'container/c1/s0'), { name: 's0', description: 'root of c1', config: { 'user.foo': 'baz', 'snapshots.expiry': '1d' } });
  const snaps = await d.request('GET', '/1.0/storage-pools/default/volumes/container/c1/snapshots');
  t.deepEqual(snaps.json.metadata, ['/1.0/storage-pools/default/volumes/container/c1/snapshots/s0']);
  // The snapshot keeps the config it was taken with.
  await run(t, 'storage', 'volume', 'set', 'default', 'container/c1', 'user.after=1');
  t.is((await showVolume(t, 'default', 'container/c1/s0')).config['user.after'], undefined);
  const described = await d.request('PUT', '/1.0/storage-pools/default/volumes/container/c1/snapshots/s0', { description: 'snap desc' });
  t.is(described.status, 200, described.body);
  t.is((await showVolume(t, 'default', 'container/c1/s0')).description, 'snap desc');
  t.is((await d.request('GET', '/1.0/storage-pools/default/volumes/container/c1/snapshots/nope')).status, 404);

  // A copy takes the config; its description starts empty and its snapshots keep theirs, as in the reference.
  await run(t, 'copy', 'c1', 'c2');
  t.like(await showVolume(t, 'default', 'container/c2'), { description: '', config: { 'user.foo': 'baz', 'user.after': '1', 'snapshots.expiry': '1d' } });
  t.like(await showVolume(t, 'default', 'container/c2/s0'), { description: 'snap desc', config: { 'user.foo': 'baz' } });
  await run(t, 'copy', 'c1/s0', 'c3');
  t.is((await showVolume(t, 'default', 'container/c3')).config['user.after'], undefined, 'a copy of a snapshot takes the snapshot\'s config');

  await run(t, 'move', 'c2', 'c2b');
  t.like(await showVolume(t, 'default', 'container/c2b'), { config: { 'user.foo': 'baz' } });
  t.like(await showVolume(t, 'default', 'container/c2b/s0'), { description: 'snap desc' });
  await run(t, 'delete', 'c2b');
  await run(t, 'delete', 'c3');
  await run(t, 'init', 'bb', 'c2b');
  t.like(await showVolume(t, 'default', 'container/c2b'), { config: {}, description: '' }, 'nothing of the deleted instance\'s volume came back');
  await run(t, 'delete', 'c2b');
});

test.serial('lxc export writes the volume section of backup.yaml with its config; lxc import puts it back', async (t) => {
  const file = path.join(work, 'c1.tar.gz');
  await run(t, 'export', 'c1', file);
  const index = parse(spawnSync('tar', ['-xzf', file, '-O', 'backup/index.yaml'], { encoding: 'utf8' }).stdout);
  t.like(index.config.volume, { description: 'root of c1', name: 'c1', type: 'container', config: { 'user.foo': 'baz', 'snapshots.expiry': '1d' } });
  t.like(index.config.volume_snapshots[0], { name: 's0', description: 'snap desc', config: { 'user.foo': 'baz' } });

  await run(t, 'import', file, 'c4');
  t.like(await showVolume(t, 'default', 'container/c4'), { description: 'root of c1', config: { 'user.foo': 'baz', 'user.after': '1', 'snapshots.expiry': '1d' } });
  t.like(await showVolume(t, 'default', 'container/c4/s0'), { description: 'snap desc', config: { 'user.foo': 'baz' } });
  await run(t, 'delete', 'c4');
});

test.serial('image volumes carry config and a description; their config is not editable', async (t) => {
  const fingerprint = (await run(t, 'image', 'list', '--format', 'csv', '-c', 'F')).trim();
  const url = `/1.0/storage-pools/default/volumes/image/${fingerprint}`;
  t.like(await showVolume(t, 'default', `image/${fingerprint}`), { type: 'image', name: fingerprint });
  t.is((await d.request('PUT', url, { config: {}, description: 'unpacked busybox' })).status, 200);
  t.is((await showVolume(t, 'default', `image/${fingerprint}`)).description, 'unpacked busybox');
  t.regex(await refused(t, 'storage', 'volume', 'set', 'default', `image/${fingerprint}`, 'user.a=1'), /image volume/);
});

test.serial('pools take volume.* keys as the reference does and give them to new volumes', async (t) => {
  await run(t, 'storage', 'create', 'p2', 'dir', 'volume.snapshots.expiry=2d', 'volume.snapshots.schedule=@daily', 'volume.snapshots.pattern=v%d', 'volume.size=1GiB');
  await run(t, 'storage', 'set', 'p2', 'volume.security.shifted=true');
  t.regex(await refused(t, 'storage', 'set', 'p2', 'volume.block.filesystem=ext4'), /volume\.block\.filesystem/);
  t.regex(await refused(t, 'storage', 'set', 'p2', 'volume.bogus=1'), /volume\.bogus/);
  t.regex(await refused(t, 'storage', 'set', 'p2', 'volume.user.foo=1'), /volume\.user\.foo/);
  t.regex(await refused(t, 'storage', 'set', 'p2', 'volume.snapshots.expiry=garbage'), /volume\.snapshots\.expiry/);
  t.regex(await refused(t, 'storage', 'set', 'p2', 'volume.snapshots.schedule=@sometimes'), /volume\.snapshots\.schedule/);
  t.regex(await refused(t, 'storage', 'set', 'p2', 'volume.snapshots.schedule=@startup'), /volume\.snapshots\.schedule/);
  t.like(parse(await run(t, 'storage', 'show', 'p2')).config, { 'volume.snapshots.expiry': '2d', 'volume.security.shifted': 'true' });

  // A custom filesystem volume takes every default; a block volume all but security.*; its own keys win.
  await run(t, 'storage', 'volume', 'create', 'p2', 'v1');
  t.deepEqual((await showVolume(t, 'p2', 'v1')).config, {
    'security.shifted': 'true', size: '1GiB', 'snapshots.expiry': '2d', 'snapshots.pattern': 'v%d', 'snapshots.schedule': '@daily',
  });
  await run(t, 'storage', 'volume', 'create', 'p2', 'blk', '--type=block', 'size=10MiB', 'snapshots.expiry=1w');
  t.deepEqual((await showVolume(t, 'p2', 'blk')).config, { size: '10MiB', 'snapshots.expiry': '1w', 'snapshots.pattern': 'v%d', 'snapshots.schedule': '@daily' });

  // A copy from another pool keeps its config and takes the defaults it lacks.
  await run(t, 'storage', 'volume', 'create', 'default', 'cv', 'user.k=1');
  await run(t, 'storage', 'volume', 'copy', 'default/cv', 'p2/cv2');
  t.deepEqual((await showVolume(t, 'p2', 'cv2')).config, {
    'security.shifted': 'true', size: '1GiB', 'snapshots.expiry': '2d', 'snapshots.pattern': 'v%d', 'snapshots.schedule': '@daily', 'user.k': '1',
  });
  // So does a volume imported from a backup.
  const backup = path.join(work, 'cv.tar.gz');
  await run(t, 'storage', 'volume', 'export', 'default', 'cv', backup);
  await run(t, 'storage', 'volume', 'import', 'p2', backup, 'cv3');
  t.deepEqual((await showVolume(t, 'p2', 'cv3')).config, {
    'security.shifted': 'true', size: '1GiB', 'snapshots.expiry': '2d', 'snapshots.pattern': 'v%d', 'snapshots.schedule': '@daily', 'user.k': '1',
  });
  await run(t, 'storage', 'volume', 'delete', 'p2', 'cv3');
  await run(t, 'storage', 'volume', 'delete', 'p2', 'cv2');
  await run(t, 'storage', 'volume', 'delete', 'default', 'cv');

  // New snapshots of the volume expire by the inherited snapshots.expiry.
  const before = Date.now();
  await run(t, 'storage', 'volume', 'snapshot', 'p2', 'v1', 's1');
  const expires = Date.parse((await showVolume(t, 'p2', 'v1/s1')).expires_at);
  t.true(Math.abs(expires - (before + 2 * 86400_000)) < 60_000, `expires_at ${new Date(expires).toISOString()} is two days on`);

  // Instance and image volumes take the snapshot keys only.
  await run(t, 'init', 'bb', 'c5', '-s', 'p2');
  t.deepEqual((await showVolume(t, 'p2', 'container/c5')).config, { 'snapshots.expiry': '2d', 'snapshots.pattern': 'v%d', 'snapshots.schedule': '@daily' });
  const fingerprint = (await run(t, 'image', 'list', '--format', 'csv', '-c', 'F')).trim();
  t.deepEqual((await showVolume(t, 'p2', `image/${fingerprint}`)).config, { 'snapshots.expiry': '2d', 'snapshots.pattern': 'v%d', 'snapshots.schedule': '@daily' });

  // A move to the pool keeps the volume's description and config and adds the pool's defaults it lacks.
  await run(t, 'init', 'bb', 'c6');
  t.is((await d.request('PUT', '/1.0/storage-pools/default/volumes/container/c6', { config: { 'user.m': '1' }, description: 'moving' })).status, 200);
  await run(t, 'move', 'c6', '-s', 'p2');
  t.like(await showVolume(t, 'p2', 'container/c6'), {
    description: 'moving', config: { 'user.m': '1', 'snapshots.expiry': '2d', 'snapshots.pattern': 'v%d', 'snapshots.schedule': '@daily' },
  });

  await run(t, 'delete', 'c5');
  await run(t, 'delete', 'c6');
  await run(t, 'storage', 'volume', 'delete', 'p2', 'v1/s1');
  await run(t, 'storage', 'volume', 'delete', 'p2', 'v1');
  await run(t, 'storage', 'volume', 'delete', 'p2', 'blk');
});

test.serial('pylxd: an instance volume\'s config changed with save()', async (t) => {
  const res = await python(path.join(projectRoot, 'test', 'e2e', 'pylxd_instance_volume.py'), [d.socket, 'c1']);
  t.is(res.status, 0, res.stderr);
  const seen = JSON.parse(res.stdout.trim().split('\n').pop()!);
  t.is(seen.type, 'container');
  t.is(seen.before['user.foo'], 'baz');
  t.like(seen.config, { 'user.foo': 'baz', 'user.py': 'yes' });
  t.is(seen.description, '', 'a PUT without a description clears it, as the reference does');
});
