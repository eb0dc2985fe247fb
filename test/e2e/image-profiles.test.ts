/**
 * Image profiles (image_profiles) through `lxc`, as the reference (LXD 5.0.2) keeps and applies them:
 * `lxc image edit` sets the list, an empty one included; a PUT naming none resets it to `default`;
 * the list is answered in name order; instances made from the image without naming profiles
 * (absent or null) take the image's, while an explicit list (`-p`, `--no-profiles`) wins.
 */
import test from 'ava';
import { rmSync } from 'node:fs';
import { killContainers, startWithPool, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { callAndWait, importImage } from '../helpers/api.js';
import { hasLxc, lxc, lxcOk, lxcWithInput } from '../helpers/clients.js';

let d: Daemon;
let image: BusyboxImage;
let fp: string;

test.before(async () => {
  if (!hasLxc()) return;
  image = buildBusyboxImage('gzip');
  d = await startWithPool();
  fp = await importImage(d, image.unified, 'bb');
  for (const name of ['marked', 'zz']) {
    const res = await d.request('POST', '/1.0/profiles', { name, config: name === 'marked' ? { 'user.mark': 'yes' } : {} });
    if (res.status !== 200) throw new Error(res.body);
  }
});

test.after.always(async () => {
  if (d) killContainers(d.dir);
  await stopDaemons();
  if (image) rmSync(image.dir, { recursive: true, force: true });
});

const imageProfiles = async () => (await d.request('GET', `/1.0/images/${fp}`)).json.metadata.profiles;
const instance = async (name: string) => (await d.request('GET', `/1.0/instances/${name}`)).json.metadata;
const edit = (yaml: string) => lxcWithInput(d.socket, yaml, 'image', 'edit', 'bb');

test.serial('lxc image edit keeps the profiles it is given, an empty list included', async (t) => {
  if (!hasLxc()) return t.pass('lxc (lxd-client) is not installed');
  t.deepEqual(await imageProfiles(), ['default']);
  const shown = await lxcOk(t, d.socket, 'image', 'show', 'bb');
  const emptied = await edit(shown.replace(/profiles:\n- default\n/, 'profiles: []\n'));
  t.is(emptied.status, 0, emptied.stderr);
  t.deepEqual(await imageProfiles(), []);
  t.regex(await lxcOk(t, d.socket, 'image', 'show', 'bb'), /^profiles: \[\]$/m);

  // Answered in name order, whatever order they were given in.
  const two = await edit('profiles:\n- zz\n- default\n');
  t.is(two.status, 0, two.stderr);
  t.deepEqual(await imageProfiles(), ['default', 'zz']);

  // A PUT that names none (absent or null) means `default`.
  t.is((await d.request('PUT', `/1.0/images/${fp}`, { public: false })).status, 200);
  t.deepEqual(await imageProfiles(), ['default']);
  t.is((await d.request('PUT', `/1.0/images/${fp}`, { profiles: ['zz'] })).status, 200);
  t.is((await d.request('PUT', `/1.0/images/${fp}`, { profiles: null })).status, 200);
  t.deepEqual(await imageProfiles(), ['default']);

  // Refusals leave the list as it was.
  const unknown = await edit('profiles:\n- nope\n');
  t.not(unknown.status, 0);
  t.regex(unknown.stderr, /nope/);
  const twice = await d.request('PUT', `/1.0/images/${fp}`, { profiles: ['zz', 'zz'] });
  t.is(twice.status, 400);
  t.regex(twice.json.error, /zz/);
  t.deepEqual(await imageProfiles(), ['default']);
});

test.serial('new instances take the image\'s profiles when the request names none', async (t) => {
  if (!hasLxc()) return t.pass('lxc (lxd-client) is not installed');
  t.is((await edit('profiles:\n- marked\n- default\n')).status, 0);
  t.deepEqual(await imageProfiles(), ['default', 'marked']);

  await lxcOk(t, d.socket, 'init', 'bb', 'c1');
  const c1 = await instance('c1');
  t.deepEqual(c1.profiles, ['default', 'marked']);
  t.is(c1.expanded_config['user.mark'], 'yes');

  // An explicit list wins: -p, and --no-profiles (an empty list).
  await lxcOk(t, d.socket, 'init', 'bb', 'c2', '-p', 'default');
  t.deepEqual((await instance('c2')).profiles, ['default']);
  await lxcOk(t, d.socket, 'init', 'bb', 'c3', '--no-profiles', '-s', 'default');
  t.deepEqual((await instance('c3')).profiles, []);

  // Through the API: null is "none named", as absent is.
  const c4 = await callAndWait(d, 'POST', '/1.0/instances', { name: 'c4', profiles: null, source: { type: 'image', alias: 'bb' } });
  t.is(c4.op?.status, 'Success', c4.op?.err ?? c4.body);
  t.deepEqual((await instance('c4')).profiles, ['default', 'marked']);

  // An image without profiles gives none: no root disk then, and no instance is left behind.
  t.is((await edit('profiles: []\n')).status, 0);
  const bare = await lxc(d.socket, 'init', 'bb', 'c5');
  t.not(bare.status, 0);
  t.regex(bare.stderr, /root disk/i);
  t.is((await d.request('GET', '/1.0/instances/c5')).status, 404);
});
