/**
 * Projects on a real daemon: CRUD with ETags, names and keys refused as the reference refuses them,
 * the features.* mapping seen through the images, profiles and instances routes, used_by, /state,
 * rename and delete refused while a project holds something, lifecycle events, the unknown-project
 * 404, and instances copied and moved between projects with their snapshots and files.
 */
import test from 'ava';
import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { startDaemon, stopDaemons, waitFor, collect, killContainers, type Daemon } from '../helpers/daemon.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { callAndWait, importImage } from '../helpers/api.js';

const PLUGINS = 'warnings,storage,storage-dir,images,profiles,instances,instance-lxc,projects';

let d: Daemon;
let image: BusyboxImage;
let fingerprint: string;

const call = (method: string, url: string, body?: unknown, headers?: Record<string, string>) => callAndWait(d, method, url, body, headers);
const get = async (url: string) => (await d.request('GET', url)).json.metadata;
const ok = (t: any, res: { status: number; op?: any; body: string }, what: string) => {
  t.true(res.status < 300, `${what}: ${res.status} ${res.body}`);
  if (res.op) t.is(res.op.status, 'Success', `${what}: ${res.op.err}`);
};
const refused = (t: any, res: { status: number; json: any; op?: any }, status: number, pattern: RegExp, what: string) => {
  const message = res.op ? res.op.err : res.json?.error;
  t.is(res.op ? res.op.status_code : res.status, status, `${what}: ${message}`);
  t.regex(String(message), pattern, what);
};
/** The first bytes of a download, undecoded. */
const head = (url: string, n: number) => new Promise<number[]>((resolve, reject) => {
  http.get({ socketPath: d.socket, path: url }, (res) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => resolve([...Buffer.concat(chunks).subarray(0, n)]));
  }).on('error', reject);
});
const fileUrl = (name: string, p: string, project: string) => `/1.0/instances/${name}/files?path=${encodeURIComponent(p)}&project=${project}`;

test.before(async () => {
  image = buildBusyboxImage('gzip');
  d = await startDaemon({ plugins: PLUGINS, args: ['--init', 'auto'] });
  await waitFor(async () => (await d.request('GET', '/1.0/storage-pools')).json?.metadata?.length === 1, 10000, 'the init pool');
  fingerprint = await importImage(d, image.unified, 'bb');
});

test.after.always(async () => {
  killContainers(d?.dir);
  await stopDaemons();
});

test.serial('the default project exists from the first start, with its features on (projects)', async (t) => {
  const info = await get('/1.0');
  for (const name of ['projects', 'project_usage', 'usedby_consistency', 'container_copy_project', 'instance_project_move']) {
    t.true(info.api_extensions.includes(name), name);
  }
  t.deepEqual(await get('/1.0/projects'), ['/1.0/projects/default']);
  const res = await d.request('GET', '/1.0/projects/default');
  t.truthy(res.headers.etag);
  t.deepEqual(res.json.metadata, {
    config: { 'features.images': 'true', 'features.networks': 'true', 'features.profiles': 'true', 'features.storage.volumes': 'true' },
    description: 'Default LXD project',
    name: 'default',
    used_by: ['/1.0/profiles/default', `/1.0/images/${fingerprint}`],
  });
  t.deepEqual(await get('/1.0/projects?recursion=1'), [res.json.metadata]);
});

test.serial('create: names and keys checked, features default on, its own default profile, 409 for a taken name, lifecycle events', async (t) => {
  const ws = await d.websocket('/1.0/events?type=lifecycle&all-projects=true');
  const events = collect(ws);
  for (const [name, why] of [['', /No name/], ['a/b', /slashes/], ['a b', /spaces/], ['a_b', /underscores/], ["a'b", /quotes/], ['*', /reserved/], ['..', /Invalid project name/], ['a?b', /may not contain/], ['x'.repeat(64), /63/]] as const) {
    refused(t, await d.request('POST', '/1.0/projects', { name }), 400, why, `name ${JSON.stringify(name)}`);
  }
  refused(t, await d.request('POST', '/1.0/projects', { name: 'k1', config: { bogus: '1' } }), 400, /bogus/, 'unknown key');
  refused(t, await d.request('POST', '/1.0/projects', { name: 'k1', config: { 'features.images': 'maybe' } }), 400, /features\.images/, 'bad boolean');
  refused(t, await d.request('POST', '/1.0/projects', { name: 'k1', config: { 'limits.cpu': '1.5' } }), 400, /limits\.cpu/, 'bad count');
  refused(t, await d.request('POST', '/1.0/projects', { name: 'k1', config: { 'limits.memory': '50%' } }), 400, /limits\.memory/, 'percentage limit');
  refused(t, await d.request('POST', '/1.0/projects', { name: 'k1', config: { 'restricted.containers.privilege': 'maybe' } }), 400, /privilege/, 'bad choice');
  refused(t, await d.request('POST', '/1.0/projects', { name: 'k1', config: { restricted: 'true', 'features.profiles': 'false' } }), 400, /own profiles/, 'restricted without profiles');
  t.is((await d.request('GET', '/1.0/projects/k1')).status, 404, 'no refused project was stored');

  const made = await d.request('POST', '/1.0/projects', { name: 'alpha', description: 'first', config: { 'user.team': 'blue', 'images.compression_algorithm': 'xz' } });
  t.is(made.status, 200, made.body);
  t.is(made.headers.location, '/1.0/projects/alpha');
  t.deepEqual(await get('/1.0/projects/alpha'), {
    config: { 'features.images': 'true', 'features.profiles': 'true', 'features.storage.volumes': 'true', 'images.compression_algorithm': 'xz', 'user.team': 'blue' },
    description: 'first',
    name: 'alpha',
    used_by: ['/1.0/profiles/default?project=alpha'],
  });
  t.deepEqual(await get('/1.0/profiles/default?project=alpha'), {
    config: {}, description: 'Default LXD profile for project alpha', devices: {}, name: 'default', used_by: [],
  });
  // A feature the creator names keeps the creator's value; the others default on.
  ok(t, await d.request('POST', '/1.0/projects', { name: 'beta', config: { 'features.images': 'false' } }), 'beta');
  t.deepEqual((await get('/1.0/projects/beta')).config, { 'features.images': 'false', 'features.profiles': 'true', 'features.storage.volumes': 'true' });

  refused(t, await d.request('POST', '/1.0/projects', { name: 'alpha' }), 409, /already exists/, 'taken');
  refused(t, await d.request('POST', '/1.0/projects', { name: 'default' }), 409, /already exists/, 'default');
  t.deepEqual(await get('/1.0/projects'), ['/1.0/projects/alpha', '/1.0/projects/beta', '/1.0/projects/default']);

  await waitFor(() => events.filter((e) => e.metadata.action === 'project-created').length === 2, 5000, 'two project-created events');
  const created = events.find((e) => e.metadata.action === 'project-created' && e.metadata.source === '/1.0/projects/alpha');
  t.is(created.project, 'alpha');
  t.is(created.metadata.requestor.protocol, 'unix');
  ws.close();
});

test.serial('an unknown ?project= is a 404 on every route family; a known one is served', async (t) => {
  for (const url of ['/1.0/instances', '/1.0/profiles', '/1.0/images', '/1.0/images/aliases', '/1.0/operations', '/1.0/profiles/default']) {
    const res = await d.request('GET', `${url}${url.includes('?') ? '&' : '?'}project=nowhere`);
    t.is(res.status, 404, url);
    t.regex(res.json.error, /Project "nowhere" not found/, url);
  }
  const upgrade = await d.websocket('/1.0/events?project=nowhere').then(() => 0, (err) => err.status);
  t.is(upgrade, 404, 'the events websocket too');
  refused(t, await d.request('POST', '/1.0/instances?project=nowhere', { name: 'x', source: { type: 'none' } }), 404, /not found/, 'create in unknown project');
  t.is((await d.request('GET', '/1.0/projects/nowhere')).status, 404);
  t.is((await d.request('GET', '/1.0/projects/nowhere/state')).status, 404);
  t.is((await d.request('GET', '/1.0/instances?project=alpha')).status, 200);
});

test.serial('PUT and PATCH with ETag and If-Match; PATCH merges config; default project features fixed', async (t) => {
  const res = await d.request('GET', '/1.0/projects/alpha');
  const etag = res.headers.etag as string;
  const stale = await d.request('PUT', '/1.0/projects/alpha', { config: {}, description: 'x' }, { 'if-match': '"0000"' });
  t.is(stale.status, 412);
  ok(t, await d.request('PATCH', '/1.0/projects/alpha', { config: { 'user.extra': '1' } }, { 'if-match': etag }), 'patch');
  const patched = await get('/1.0/projects/alpha');
  t.is(patched.config['user.extra'], '1');
  t.is(patched.config['user.team'], 'blue', 'PATCH keeps keys it does not name');
  t.is(patched.description, 'first');
  t.is((await d.request('PATCH', '/1.0/projects/alpha', { config: { 'user.x': '2' } }, { 'if-match': etag })).status, 412, 'the old ETag is stale');

  ok(t, await d.request('PUT', '/1.0/projects/alpha', { config: { ...patched.config, 'user.extra': '', 'user.team': 'red' }, description: 'second' }), 'put');
  const put = await get('/1.0/projects/alpha');
  t.false('user.extra' in put.config, '"" unsets');
  t.is(put.config['user.team'], 'red');
  t.is(put.description, 'second');
  refused(t, await d.request('PUT', '/1.0/projects/alpha', { config: { ...put.config, nonsense: 'x' } }), 400, /nonsense/, 'unknown key on PUT');

  refused(t, await d.request('PATCH', '/1.0/projects/default', { config: { 'features.images': 'false' } }), 400, /default project/, 'default features');
  ok(t, await d.request('PATCH', '/1.0/projects/default', { config: { 'user.note': 'ok' } }), 'default takes other keys');
  ok(t, await d.request('PATCH', '/1.0/projects/default', { config: { 'user.note': '' } }), 'and drops them');
});

test.serial('features.profiles toggles the project\'s own default profile while the project is empty', async (t) => {
  ok(t, await d.request('PATCH', '/1.0/projects/beta', { config: { 'features.profiles': 'false' } }), 'profiles off');
  t.is((await d.request('GET', '/1.0/profiles?project=beta')).json.metadata.length, 1);
  t.deepEqual(await get('/1.0/profiles?project=beta'), ['/1.0/profiles/default'], 'beta now sees the profiles of default');
  t.deepEqual((await get('/1.0/projects/beta')).used_by, []);
  ok(t, await d.request('PATCH', '/1.0/projects/beta', { config: { 'features.profiles': 'true' } }), 'profiles on');
  t.deepEqual(await get('/1.0/profiles?project=beta'), ['/1.0/profiles/default?project=beta']);
  t.is((await get('/1.0/profiles/default?project=beta')).description, 'Default LXD profile for project beta');
});

test.serial('a project without its own images and profiles uses those of default; used_by is consistent across projects (usedby_consistency)', async (t) => {
  ok(t, await d.request('POST', '/1.0/projects', { name: 'shared', config: { 'features.images': 'false', 'features.profiles': 'false' } }), 'shared');
  t.deepEqual(await get('/1.0/images?project=shared'), [`/1.0/images/${fingerprint}`]);
  t.is((await get('/1.0/images/aliases/bb?project=shared')).target, fingerprint);
  t.deepEqual(await get('/1.0/images?project=alpha'), [], 'alpha has its own (empty) image store');
  refused(t, await d.request('POST', '/1.0/instances?project=alpha', { name: 'none', source: { type: 'image', alias: 'bb' } }), 404, /bb/, 'alias unknown in alpha');

  ok(t, await call('POST', '/1.0/instances?project=shared', { name: 's1', source: { type: 'image', alias: 'bb' } }), 'create in shared');
  const inst = await get('/1.0/instances/s1?project=shared');
  t.is(inst.project, 'shared');
  t.is(inst.expanded_devices.root.pool, 'default', 'the root disk came from the default project\'s default profile');
  t.is(inst.config['volatile.base_image'], fingerprint);
  t.true(existsSync(path.join(d.dir, 'storage-pools', 'default', 'containers', 'shared_s1')), 'volume named <project>_<name>');

  t.deepEqual((await get('/1.0/projects/shared')).used_by, ['/1.0/instances/s1?project=shared']);
  t.deepEqual((await get('/1.0/profiles/default')).used_by, ['/1.0/instances/s1?project=shared'], 'the profile lists its user with ?project=');
  t.deepEqual((await get(`/1.0/images/${fingerprint}`)).profiles, ['default']);
  t.true((await get('/1.0/projects/default')).used_by.every((u: string) => !u.includes('project=')), 'default lists only what is its own');
  refused(t, await d.request('DELETE', '/1.0/profiles/default'), 403, /cannot be deleted/, 'default profile');
});

test.serial('features are fixed, rename and delete refused while the project holds something; /state counts instances and their limits (project_usage)', async (t) => {
  refused(t, await d.request('PATCH', '/1.0/projects/shared', { config: { 'features.images': 'true' } }), 400, /features\.images.*holds/, 'features of a non-empty project');
  refused(t, await d.request('POST', '/1.0/projects/shared', { name: 'renamed' }), 400, /Only empty projects can be renamed/, 'rename');
  refused(t, await d.request('DELETE', '/1.0/projects/shared'), 400, /Only empty projects can be deleted/, 'delete');
  t.is((await d.request('GET', '/1.0/projects/shared')).status, 200);

  ok(t, await call('PATCH', '/1.0/instances/s1?project=shared', { config: { 'limits.cpu': '2', 'limits.memory': '256MiB', 'limits.processes': '100' } }), 'limits on s1');
  ok(t, await call('POST', '/1.0/instances?project=shared', {
    name: 's2', source: { type: 'image', alias: 'bb' }, config: { 'limits.cpu': '0-2,1-2', 'limits.memory': '128MiB' }, devices: { root: { type: 'disk', path: '/', pool: 'default', size: '1GiB' } },
  }), 's2');
  ok(t, await d.request('PATCH', '/1.0/projects/shared', { config: { 'limits.instances': '5', 'limits.memory': '1GiB' } }), 'limits on the project');
  const state = await get('/1.0/projects/shared/state');
  t.deepEqual(Object.keys(state.resources), ['containers', 'cpu', 'disk', 'instances', 'memory', 'networks', 'processes', 'virtual-machines']);
  t.deepEqual(state.resources.instances, { Limit: 5, Usage: 2 });
  t.deepEqual(state.resources.containers, { Limit: -1, Usage: 2 });
  t.deepEqual(state.resources['virtual-machines'], { Limit: -1, Usage: 0 });
  t.deepEqual(state.resources.cpu, { Limit: -1, Usage: 5 }, '2 CPUs plus the set 0-2,1-2 (its overlap counted once)');
  t.deepEqual(state.resources.memory, { Limit: 2 ** 30, Usage: 384 * 2 ** 20 });
  t.deepEqual(state.resources.processes, { Limit: -1, Usage: 100 });
  t.deepEqual(state.resources.disk, { Limit: -1, Usage: 2 ** 30 });
  const defaultState = await get('/1.0/projects/default/state');
  t.is(defaultState.resources.instances.Usage, 0, 'instances of other projects are not counted in default');
  t.is(defaultState.resources.disk.Usage, 0, 'images count nothing, as in the reference (decision 0008)');
  ok(t, await d.request('PATCH', '/1.0/projects/shared', { config: { 'limits.instances': '', 'limits.memory': '' } }), 'limits off');
  ok(t, await call('DELETE', '/1.0/instances/s2?project=shared'), 'drop s2');
});

test.serial('instances copied and moved between projects keep their files and snapshots (container_copy_project, instance_project_move)', async (t) => {
  ok(t, await d.request('PUT', '/1.0/profiles/default?project=alpha', { config: {}, description: '', devices: { root: { type: 'disk', path: '/', pool: 'default' } } }), 'root disk for alpha');
  t.is((await d.request('POST', fileUrl('s1', '/root/marker', 'shared'), 'moved-content', { 'x-lxd-type': 'file', 'content-type': 'application/octet-stream' })).status, 200);
  ok(t, await call('POST', '/1.0/instances/s1/snapshots?project=shared', { name: 'snap1' }), 'snapshot');

  // Copy from shared into alpha, as `lxc copy s1 c1 --target-project alpha` sends it.
  ok(t, await call('POST', '/1.0/instances?project=alpha', { name: 'c1', source: { type: 'copy', source: 's1', project: 'shared' } }), 'copy');
  t.is((await d.request('GET', fileUrl('c1', '/root/marker', 'alpha'))).body, 'moved-content');
  t.deepEqual(await get('/1.0/instances/c1/snapshots?project=alpha'), ['/1.0/instances/c1/snapshots/snap1?project=alpha']);
  t.is((await d.request('GET', '/1.0/instances/s1?project=shared')).status, 200, 'the source stays');
  refused(t, await d.request('POST', '/1.0/instances?project=alpha', { name: 'c9', source: { type: 'copy', source: 's1', project: 'nowhere' } }), 404, /not found/, 'copy from an unknown project');

  // Move, as `lxc move s1 --target-project alpha` sends it: a migration with `project`.
  const events = collect(await d.websocket('/1.0/events?type=lifecycle&all-projects=true'));
  ok(t, await call('POST', '/1.0/instances/s1?project=shared', { name: 's1', migration: true, live: true, project: 'alpha', pool: '' }), 'move');
  t.is((await d.request('GET', '/1.0/instances/s1?project=shared')).status, 404);
  t.is((await d.request('GET', fileUrl('s1', '/root/marker', 'alpha'))).body, 'moved-content');
  t.deepEqual(await get('/1.0/instances/s1/snapshots?project=alpha'), ['/1.0/instances/s1/snapshots/snap1?project=alpha']);
  const pool = path.join(d.dir, 'storage-pools', 'default');
  t.true(existsSync(path.join(pool, 'containers', 'alpha_s1')));
  t.true(existsSync(path.join(pool, 'containers-snapshots', 'alpha_s1', 'snap1')));
  t.false(existsSync(path.join(pool, 'containers', 'shared_s1')));
  t.deepEqual((await get('/1.0/projects/shared')).used_by, []);
  await waitFor(() => events.some((e) => e.metadata.action === 'instance-deleted' && e.project === 'shared'), 5000, 'instance-deleted in shared');
  t.true(events.some((e) => e.metadata.action === 'instance-created' && e.project === 'alpha' && e.metadata.source === '/1.0/instances/s1?project=alpha'));

  // Back to default under a new name; it starts there.
  ok(t, await call('POST', '/1.0/instances/s1?project=alpha', { name: 'back', migration: true, project: 'default' }), 'move back renamed');
  ok(t, await call('PUT', '/1.0/instances/back/state', { action: 'start' }), 'start');
  t.is((await get('/1.0/instances/back/state')).status, 'Running');
  refused(t, await d.request('POST', '/1.0/instances/back', { name: 'back', migration: true, project: 'alpha' }), 400, /running/, 'moving a running instance');
  ok(t, await call('PUT', '/1.0/instances/back/state', { action: 'stop', force: true }), 'stop');
  refused(t, await d.request('POST', '/1.0/instances/back', { migration: true, project: 'nowhere' }), 404, /nowhere/, 'unknown target project');
  refused(t, await d.request('POST', '/1.0/instances/back', { name: 'c1', migration: true, project: 'alpha' }), 409, /already exists/, 'name taken in the target');
  ok(t, await call('DELETE', '/1.0/instances/back'), 'delete back');
  ok(t, await call('DELETE', '/1.0/instances/c1?project=alpha'), 'delete c1');
});

test.serial('rename and delete of an empty project (an operation and a sync answer); default cannot be renamed or deleted', async (t) => {
  const events = collect(await d.websocket('/1.0/events?type=lifecycle&all-projects=true'));
  refused(t, await d.request('POST', '/1.0/projects/default', { name: 'other' }), 403, /cannot be renamed/, 'rename default');
  refused(t, await d.request('DELETE', '/1.0/projects/default'), 403, /cannot be deleted/, 'delete default');
  refused(t, await d.request('POST', '/1.0/projects/alpha', { name: 'beta' }), 409, /already exists/, 'taken name');
  refused(t, await d.request('POST', '/1.0/projects/alpha', { name: 'bad/name' }), 400, /slashes/, 'bad name');

  const renamed = await call('POST', '/1.0/projects/alpha', { name: 'gamma' });
  t.is(renamed.status, 202);
  ok(t, renamed, 'rename');
  t.is((await d.request('GET', '/1.0/projects/alpha')).status, 404);
  const gamma = await get('/1.0/projects/gamma');
  t.is(gamma.description, 'second');
  t.deepEqual(gamma.used_by, ['/1.0/profiles/default?project=gamma']);
  t.deepEqual((await get('/1.0/profiles/default?project=gamma')).devices.root, { type: 'disk', path: '/', pool: 'default' }, 'the profile edits followed');

  for (const name of ['gamma', 'beta', 'shared']) ok(t, await d.request('DELETE', `/1.0/projects/${name}`), `delete ${name}`);
  t.deepEqual(await get('/1.0/projects'), ['/1.0/projects/default']);
  t.is((await d.request('GET', '/1.0/profiles?project=gamma')).status, 404);
  await waitFor(() => events.filter((e) => e.metadata.action === 'project-deleted').length === 3, 5000, 'project-deleted events');
  const rename = events.find((e) => e.metadata.action === 'project-renamed');
  t.is(rename.metadata.source, '/1.0/projects/gamma');
  t.deepEqual(rename.metadata.context, { old_name: 'alpha' });

  // A new project under a deleted one's name starts clean.
  ok(t, await d.request('POST', '/1.0/projects', { name: 'gamma' }), 'gamma again');
  t.deepEqual((await get('/1.0/profiles/default?project=gamma')).devices, {});
  ok(t, await d.request('DELETE', '/1.0/projects/gamma'), 'delete gamma again');
});

test.serial('a project\'s images.compression_algorithm and backups.compression_algorithm come before the server\'s (projects_compression)', async (t) => {
  ok(t, await d.request('POST', '/1.0/projects', { name: 'packed', config: { 'images.compression_algorithm': 'none', 'backups.compression_algorithm': 'xz' } }), 'project');
  ok(t, await d.request('PUT', '/1.0/profiles/default?project=packed', { config: {}, description: '', devices: { root: { type: 'disk', path: '/', pool: 'default' } } }), 'root disk');
  ok(t, await call('POST', '/1.0/images?project=packed', readFileSync(image.unified), { 'content-type': 'application/octet-stream' }), 'image into packed');
  ok(t, await call('POST', '/1.0/instances?project=packed', { name: 'z1', source: { type: 'image', fingerprint } }), 'instance');

  const published = await call('POST', '/1.0/images?project=packed', { source: { type: 'instance', name: 'z1' } });
  ok(t, published, 'publish');
  const exported = await head(`/1.0/images/${published.op.metadata.fingerprint}/export?project=packed`, 262);
  t.is(Buffer.from(exported.slice(257, 262)).toString(), 'ustar', 'an uncompressed tarball');
  // Without the project setting the server's default (gzip) applies.
  ok(t, await d.request('PATCH', '/1.0/projects/packed', { config: { 'images.compression_algorithm': '' } }), 'unset');
  const again = await call('POST', '/1.0/images?project=packed', { source: { type: 'instance', name: 'z1' }, aliases: [{ name: 'gz' }] });
  ok(t, again, 'publish with the server default');
  t.deepEqual(await head(`/1.0/images/${again.op.metadata.fingerprint}/export?project=packed`, 2), [0x1f, 0x8b], 'a gzip stream');

  ok(t, await call('POST', '/1.0/instances/z1/backups?project=packed', { name: 'b1' }), 'backup');
  t.deepEqual(await head('/1.0/instances/z1/backups/b1/export?project=packed', 6), [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00], 'an xz stream');

  ok(t, await call('DELETE', '/1.0/instances/z1?project=packed'), 'delete z1');
  for (const url of await get('/1.0/images?project=packed')) ok(t, await call('DELETE', url), 'delete image');
  ok(t, await d.request('DELETE', '/1.0/projects/packed'), 'delete packed');

  // A project made again under the same name has only an empty default profile: nothing of the old one lingers.
  ok(t, await d.request('POST', '/1.0/projects', { name: 'packed', config: { 'features.images': 'false' } }), 'packed again');
  refused(t, await d.request('POST', '/1.0/instances?project=packed', { name: 'z2', source: { type: 'image', alias: 'bb' } }), 400, /root disk/, 'no root disk in the new default profile');
  ok(t, await d.request('DELETE', '/1.0/projects/packed'), 'delete packed again');
});
