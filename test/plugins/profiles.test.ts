/**
 * Profiles through the real lxc client and the API of a real daemon, and the service the
 * instances family uses (load, vetting listeners, used_by) through a test kernel.
 */
import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startDaemon, stopDaemons, collect, waitFor, type Daemon } from '../helpers/daemon.js';
import { lxc, lxcWithInput } from '../helpers/clients.js';
import { startTestKernel, type TestKernel } from '../../sdk/testing/index.js';
import { ProfilesServiceRef, type ProfileChange, type ProfilesService } from '../../sdk/index.js';

let d: Daemon;

async function ok(socket: string, ...args: string[]): Promise<string> {
  const run = await lxc(socket, ...args);
  if (run.status !== 0) throw new Error(`lxc ${args.join(' ')} failed: ${run.stderr}`);
  return run.stdout;
}

const profile = async (name: string) => (await d.request('GET', `/1.0/profiles/${encodeURIComponent(name)}`)).json.metadata;

test.before(async () => {
  d = await startDaemon({ plugins: 'storage,storage-dir,profiles' });
});

test.after.always(async () => {
  await stopDaemons();
});

test.serial('the default profile exists at first start, with used_by (profile_usedby)', async (t) => {
  const info = (await d.request('GET', '/1.0')).json.metadata;
  t.true(info.api_extensions.includes('profile_usedby'));
  t.deepEqual((await d.request('GET', '/1.0/profiles')).json.metadata, ['/1.0/profiles/default']);
  const res = await d.request('GET', '/1.0/profiles/default');
  t.truthy(res.headers.etag);
  t.deepEqual(res.json.metadata, { config: {}, description: 'Default LXD profile', devices: {}, name: 'default', used_by: [] });
  const listed = (await d.request('GET', '/1.0/profiles?recursion=1')).json.metadata;
  t.deepEqual(listed, [res.json.metadata]);
});

test.serial('profiles through lxc: create, list, show, set/get/unset, edit, copy, rename, delete', async (t) => {
  const ws = await d.websocket('/1.0/events?type=lifecycle');
  const events = collect(ws);

  t.regex(await ok(d.socket, 'profile', 'create', 'web'), /web created/);
  const listed = JSON.parse(await ok(d.socket, 'profile', 'list', '--format', 'json'));
  t.deepEqual(listed.map((p: any) => p.name), ['default', 'web']);
  t.deepEqual(listed[1].used_by, []);

  await ok(d.socket, 'profile', 'set', 'web', 'user.role', 'frontend');
  t.is((await ok(d.socket, 'profile', 'get', 'web', 'user.role')).trim(), 'frontend');
  await ok(d.socket, 'profile', 'set', 'web', 'user.tier', 'one');
  await ok(d.socket, 'profile', 'unset', 'web', 'user.tier');
  t.deepEqual((await profile('web')).config, { 'user.role': 'frontend' });

  const bad = await lxc(d.socket, 'profile', 'set', 'web', 'bogus.key', '1');
  t.not(bad.status, 0);
  t.regex(bad.stderr, /bogus\.key/);

  const yaml = 'description: the web tier\nconfig:\n  user.role: backend\ndevices:\n  data:\n    type: disk\n    path: /srv\n    source: /tmp\n';
  const edited = await lxcWithInput(d.socket, yaml, 'profile', 'edit', 'web');
  t.is(edited.status, 0, edited.stderr);
  t.like(await profile('web'), { description: 'the web tier', config: { 'user.role': 'backend' }, devices: { data: { type: 'disk', path: '/srv', source: '/tmp' } } });
  t.regex(await ok(d.socket, 'profile', 'show', 'web'), /description: the web tier/);

  await ok(d.socket, 'profile', 'copy', 'web', 'web2');
  t.like(await profile('web2'), { description: 'the web tier', config: { 'user.role': 'backend' } });
  await ok(d.socket, 'profile', 'rename', 'web2', 'web3');
  t.is((await d.request('GET', '/1.0/profiles/web2')).status, 404);
  t.is((await profile('web3')).name, 'web3');

  await ok(d.socket, 'storage', 'create', 'pool1', 'dir');
  await ok(d.socket, 'profile', 'device', 'add', 'default', 'root', 'disk', 'path=/', 'pool=pool1');
  t.deepEqual((await profile('default')).devices, { root: { type: 'disk', path: '/', pool: 'pool1' } });
  await ok(d.socket, 'profile', 'device', 'remove', 'default', 'root');
  await ok(d.socket, 'storage', 'delete', 'pool1');

  await ok(d.socket, 'profile', 'delete', 'web3');
  await ok(d.socket, 'profile', 'delete', 'web');
  t.deepEqual((await d.request('GET', '/1.0/profiles')).json.metadata, ['/1.0/profiles/default']);

  await waitFor(() => events.filter((e) => e.metadata.action === 'profile-deleted').length === 2, 5000, 'the delete events');
  const mine = events.filter((e) => e.metadata.action.startsWith('profile-'));
  for (const e of mine) {
    t.is(e.project, 'default');
    t.like(e.metadata.requestor, { protocol: 'unix' });
  }
  const renamed = mine.find((e) => e.metadata.action === 'profile-renamed');
  t.is(renamed.metadata.source, '/1.0/profiles/web3');
  t.deepEqual(renamed.metadata.context, { old_name: 'web2' });
  t.deepEqual(mine.filter((e) => e.metadata.source === '/1.0/profiles/web').map((e) => e.metadata.action),
    ['profile-created', 'profile-updated', 'profile-updated', 'profile-updated', 'profile-updated', 'profile-deleted']);
  ws.close();
});

test.serial('bad requests get the right status and change nothing', async (t) => {
  const create: [unknown, number, RegExp][] = [
    [{ name: 'a/b' }, 400, /slashes/],
    [{ name: '' }, 400, /No name/],
    [{}, 400, /No name/],
    [{ name: '..' }, 400, /Invalid profile name/],
    [{ name: '.' }, 400, /Invalid profile name/],
    [{ name: 'k1', config: { 'bogus.key': '1' } }, 400, /bogus\.key/],
    [{ name: 'k2', config: ['x'] }, 400, /config/],
    [{ name: 'k3', devices: { d: { path: '/x' } } }, 400, /Missing device type/],
    [{ name: 'k4', devices: { d: 'disk' } }, 400, /devices\.d/],
    [{ name: 'default' }, 409, /already exists/],
  ];
  for (const [body, status, message] of create) {
    const res = await d.request('POST', '/1.0/profiles', body);
    t.is(res.status, status, JSON.stringify(body));
    t.is(res.json.type, 'error');
    t.regex(res.json.error, message, JSON.stringify(body));
  }
  t.deepEqual((await d.request('GET', '/1.0/profiles')).json.metadata, ['/1.0/profiles/default']);

  const del = await d.request('DELETE', '/1.0/profiles/default');
  t.is(del.status, 403);
  t.regex(del.json.error, /"default" profile cannot be deleted/);
  const ren = await d.request('POST', '/1.0/profiles/default', { name: 'other' });
  t.is(ren.status, 403);
  t.regex(ren.json.error, /"default" profile cannot be renamed/);

  await d.request('POST', '/1.0/profiles', { name: 'one' });
  await d.request('POST', '/1.0/profiles', { name: 'two' });
  const clash = await d.request('POST', '/1.0/profiles/one', { name: 'two' });
  t.is(clash.status, 409);
  t.regex(clash.json.error, /already in use/);
  t.is((await d.request('POST', '/1.0/profiles/one', { name: 'bad/name' })).status, 400);
  const racing = await Promise.all([1, 2, 3].map(() => d.request('POST', '/1.0/profiles', { name: 'race' })));
  t.deepEqual(racing.map((r) => r.status).sort(), [200, 409, 409]);

  for (const [method, url, body] of [['GET', '/1.0/profiles/missing'], ['PUT', '/1.0/profiles/missing', {}], ['DELETE', '/1.0/profiles/missing'], ['POST', '/1.0/profiles/missing', { name: 'x' }]] as const) {
    const res = await d.request(method, url, body);
    t.is(res.status, 404, `${method} ${url}`);
    t.regex(res.json.error, /Profile not found/);
  }
  const badPut = await d.request('PUT', '/1.0/profiles/one', { config: { 'nope.key': 'x' } });
  t.is(badPut.status, 400);
  t.deepEqual((await profile('one')).config, {});
  for (const name of ['one', 'two', 'race']) t.is((await d.request('DELETE', `/1.0/profiles/${name}`)).status, 200);
});

test.serial('ETag, If-Match, PUT and PATCH of a profile', async (t) => {
  await d.request('POST', '/1.0/profiles', { name: 'tagged', description: 'first', config: { 'user.a': '1' }, devices: { x: { type: 'none' } } });
  const got = await d.request('GET', '/1.0/profiles/tagged');
  const etag = got.headers.etag as string;
  t.truthy(etag);
  const stale = await d.request('PUT', '/1.0/profiles/tagged', { description: 'x' }, { 'If-Match': '"stale"' });
  t.is(stale.status, 412);
  t.is((await profile('tagged')).description, 'first');

  t.is((await d.request('PATCH', '/1.0/profiles/tagged', { config: { 'user.b': '2' } }, { 'If-Match': etag })).status, 200);
  t.like(await profile('tagged'), { description: 'first', config: { 'user.a': '1', 'user.b': '2' }, devices: { x: { type: 'none' } } });
  t.is((await d.request('PATCH', '/1.0/profiles/tagged', { config: { 'user.a': '' } })).status, 200);
  t.deepEqual((await profile('tagged')).config, { 'user.b': '2' });
  t.is((await d.request('PATCH', '/1.0/profiles/tagged', { config: {} }, { 'If-Match': etag })).status, 412);

  t.is((await d.request('PUT', '/1.0/profiles/tagged', { description: 'replaced' })).status, 200);
  t.deepEqual(await profile('tagged'), { config: {}, description: 'replaced', devices: {}, name: 'tagged', used_by: [] });

  const filtered = (await d.request('GET', `/1.0/profiles?recursion=1&filter=${encodeURIComponent('description eq replaced')}`)).json.metadata;
  t.deepEqual(filtered.map((p: any) => p.name), ['tagged']);
  await d.request('DELETE', '/1.0/profiles/tagged');
});

test.serial('the default profile is made once: edits survive a restart', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-profiles-restart-'));
  try {
    let daemon = await startDaemon({ plugins: 'profiles', dir });
    t.is((await daemon.request('PATCH', '/1.0/profiles/default', { description: 'mine', config: { 'user.k': 'v' } })).status, 200);
    await daemon.stop();
    daemon = await startDaemon({ plugins: 'profiles', dir });
    t.like((await daemon.request('GET', '/1.0/profiles/default')).json.metadata, { description: 'mine', config: { 'user.k': 'v' } });
    await daemon.stop();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// ---- The service the instances family uses, through a test kernel. ----

let tk: TestKernel;
let profiles: ProfilesService;
const seen: ProfileChange[] = [];
let users: Record<string, string[]> = {};

test.before(async () => {
  tk = await startTestKernel({ plugins: ['profiles'] });
  profiles = tk.kernel.services.get(ProfilesServiceRef)!;
  profiles.usedBy.add((project, name) => users[`${project}/${name}`] ?? []);
  profiles.onChange(async (change) => {
    // What the listener sees must not be stored yet: the change is vetted before it is written.
    const stored = await tk.inject({ url: `/1.0/profiles/${change.name}` });
    seen.push({ ...change, before: stored.statusCode === 200 ? stored.json.metadata : undefined } as ProfileChange);
    if (change.profile?.devices && Object.values(change.profile.devices).some((dev) => dev.type === 'warp-drive')) {
      throw new Error('Unsupported device type "warp-drive"');
    }
  });
});

test.after.always(async () => {
  await tk?.stop();
});

test.serial('listeners see every change before it is written and can refuse it', async (t) => {
  const created = await tk.inject({ method: 'POST', url: '/1.0/profiles', payload: { name: 'vetted', config: { 'user.a': '1' } } });
  t.is(created.statusCode, 200);
  const last = () => seen[seen.length - 1] as ProfileChange & { before: any };
  t.like(last(), { project: 'default', name: 'vetted', profile: { name: 'vetted', config: { 'user.a': '1' }, devices: {}, description: '' } });
  t.is(last().before, undefined);

  const refused = await tk.inject({ method: 'PUT', url: '/1.0/profiles/vetted', payload: { devices: { w: { type: 'warp-drive' } } } });
  t.is(refused.statusCode, 400);
  t.regex(refused.json.error, /warp-drive/);
  t.deepEqual((await tk.inject({ url: '/1.0/profiles/vetted' })).json.metadata.devices, {});
  const refusedCreate = await tk.inject({ method: 'POST', url: '/1.0/profiles', payload: { name: 'never', devices: { w: { type: 'warp-drive' } } } });
  t.is(refusedCreate.statusCode, 400);
  t.is((await tk.inject({ url: '/1.0/profiles/never' })).statusCode, 404);

  t.is((await tk.inject({ method: 'PATCH', url: '/1.0/profiles/vetted', payload: { description: 'two' } })).statusCode, 200);
  t.like(last(), { name: 'vetted', profile: { description: 'two' }, before: { description: '' } });

  t.is((await tk.inject({ method: 'POST', url: '/1.0/profiles/vetted', payload: { name: 'moved' } })).statusCode, 200);
  t.like(last(), { name: 'vetted', newName: 'moved', profile: { name: 'moved' } });

  t.is((await tk.inject({ method: 'DELETE', url: '/1.0/profiles/moved' })).statusCode, 200);
  t.like(last(), { name: 'moved' });
  t.is(last().profile, undefined);
});

test.serial('used_by comes from the providers; a used profile cannot be deleted or renamed', async (t) => {
  await tk.inject({ method: 'POST', url: '/1.0/profiles', payload: { name: 'busy' } });
  users = { 'default/busy': ['/1.0/instances/c2', '/1.0/instances/c1'], 'default/default': ['/1.0/instances/c1'] };
  t.deepEqual((await tk.inject({ url: '/1.0/profiles/busy' })).json.metadata.used_by, ['/1.0/instances/c1', '/1.0/instances/c2']);
  const del = await tk.inject({ method: 'DELETE', url: '/1.0/profiles/busy' });
  t.is(del.statusCode, 400);
  t.regex(del.json.error, /in use/);
  const ren = await tk.inject({ method: 'POST', url: '/1.0/profiles/busy', payload: { name: 'idle' } });
  t.is(ren.statusCode, 400);
  t.regex(ren.json.error, /in use/);
  t.is((await tk.inject({ url: '/1.0/profiles/busy' })).statusCode, 200);
  users = {};
  t.is((await tk.inject({ method: 'DELETE', url: '/1.0/profiles/busy' })).statusCode, 200);
});

test.serial('load answers profiles in the order asked and names the first missing one', async (t) => {
  await tk.inject({ method: 'POST', url: '/1.0/profiles', payload: { name: 'second', config: { 'user.n': '2' } } });
  const loaded = await profiles.load('default', ['second', 'default']);
  t.deepEqual(loaded.map((p) => p.name), ['second', 'default']);
  t.deepEqual(loaded[0].config, { 'user.n': '2' });
  await t.throwsAsync(profiles.load('default', ['default', 'ghost', 'phantom']), { message: /"ghost"/ });
  await tk.inject({ method: 'DELETE', url: '/1.0/profiles/second' });
});
