/**
 * Projects through the real `lxc` client: create/set/get/show/edit/list/info/switch/rename/delete,
 * launching into a project, copies and moves between projects, `lxc list --all-projects`.
 * pylxd 2.2.10 (Debian) has no project support (no Project model, no `project` argument to
 * Client), so projects are checked with lxc only.
 */
import test from 'ava';
import { startDaemon, stopDaemons, waitFor, killContainers, type Daemon } from '../helpers/daemon.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { importImage } from '../helpers/api.js';
import { lxc, lxcOk, lxcWithInput } from '../helpers/clients.js';
import { rmSync } from 'node:fs';

const PLUGINS = 'warnings,storage,storage-dir,images,profiles,instances,instance-lxc,projects';

let d: Daemon;
let image: BusyboxImage;

const run = (t: any, ...args: string[]) => lxcOk(t, d.socket, ...args);
const fails = async (t: any, pattern: RegExp, ...args: string[]) => {
  const res = await lxc(d.socket, ...args);
  t.not(res.status, 0, `lxc ${args.join(' ')} should fail`);
  t.regex(res.stderr, pattern, `lxc ${args.join(' ')}`);
};
const csv = async (t: any, ...args: string[]) => (await run(t, ...args, '--format', 'csv')).trim().split('\n').filter(Boolean);

test.before(async () => {
  image = buildBusyboxImage('gzip');
  d = await startDaemon({ plugins: PLUGINS, args: ['--init', 'auto'] });
  await waitFor(async () => (await d.request('GET', '/1.0/storage-pools')).json?.metadata?.length === 1, 10000, 'the init pool');
  await importImage(d, image.unified, 'bb');
});

test.after.always(async () => {
  // The client's current project lives in the shared client config: leave it on default.
  await lxc(d.socket, 'project', 'switch', 'default');
  killContainers(d?.dir);
  await stopDaemons();
  rmSync(image.dir, { recursive: true, force: true });
});

test.serial('lxc project create, set, get, unset, show, edit, list, info', async (t) => {
  t.regex(await run(t, 'project', 'create', 'p1', '-c', 'features.images=false', '-c', 'features.profiles=false'), /Project p1 created/);
  await run(t, 'project', 'create', 'p2');
  await run(t, 'project', 'set', 'p1', 'user.owner=ops');
  t.is((await run(t, 'project', 'get', 'p1', 'user.owner')).trim(), 'ops');
  await run(t, 'project', 'unset', 'p1', 'user.owner');
  t.is((await run(t, 'project', 'get', 'p1', 'user.owner')).trim(), '');
  await fails(t, /bogus/, 'project', 'set', 'p1', 'bogus=1');
  await fails(t, /limits\.memory/, 'project', 'set', 'p1', 'limits.memory=lots');

  const shown = await run(t, 'project', 'show', 'p1');
  t.regex(shown, /features\.images: "false"/);
  t.regex(shown, /features\.profiles: "false"/);
  t.regex(shown, /features\.storage\.volumes: "true"/);
  t.regex(shown, /name: p1/);

  const edited = await lxcWithInput(d.socket, 'description: edited by lxc\nconfig:\n  features.images: "false"\n  features.profiles: "false"\n  features.storage.volumes: "true"\n  user.tier: gold\n', 'project', 'edit', 'p1');
  t.is(edited.status, 0, edited.stderr);
  const p1 = (await d.request('GET', '/1.0/projects/p1')).json.metadata;
  t.is(p1.description, 'edited by lxc');
  t.is(p1.config['user.tier'], 'gold');

  const rows = await csv(t, 'project', 'list');
  t.true(rows.some((r) => r.startsWith('default (current),YES,YES,YES,YES,Default LXD project')), rows.join('\n'));
  t.true(rows.some((r) => r.startsWith('p1,NO,NO,YES,NO,edited by lxc,0')), rows.join('\n'));
  t.true(rows.some((r) => r.startsWith('p2,YES,YES,YES,NO,,1')), rows.join('\n'));

  const info = await run(t, 'project', 'info', 'p1');
  t.regex(info, /CONTAINERS\s*\|\s*UNLIMITED\s*\|\s*0/);
});

test.serial('lxc project switch, then launch into the project with the images and profiles of default', async (t) => {
  await run(t, 'project', 'switch', 'p1');
  t.true((await csv(t, 'project', 'list')).some((r) => r.startsWith('p1 (current)')));
  await run(t, 'launch', 'bb', 'c1');
  t.deepEqual(await csv(t, 'list', '-c', 'ns'), ['c1,RUNNING']);
  t.is((await run(t, 'exec', 'c1', '--', 'cat', '/proc/1/comm')).trim().length > 0, true);
  await run(t, 'project', 'switch', 'default');
  t.deepEqual(await csv(t, 'list', '-c', 'n'), [], 'default does not see p1\'s instance');
  t.deepEqual(await csv(t, '--project', 'p1', 'list', '-c', 'n'), ['c1']);
  t.regex(await run(t, 'project', 'info', 'p1'), /CONTAINERS\s*\|\s*UNLIMITED\s*\|\s*1/);
  t.regex(await run(t, 'project', 'show', 'p1'), /\/1\.0\/instances\/c1\?project=p1/);
  t.regex(await run(t, 'profile', 'show', 'default'), /\/1\.0\/instances\/c1\?project=p1/, 'the default profile lists its user in p1');

  await fails(t, /features\.images/, 'project', 'set', 'p1', 'features.images=true');
  await fails(t, /empty/, 'project', 'rename', 'p1', 'p9');
  await fails(t, /empty/, 'project', 'delete', 'p1');
});

test.serial('lxc copy and move with --target-project; lxc list --all-projects', async (t) => {
  await run(t, '--project', 'p2', 'profile', 'device', 'add', 'default', 'root', 'disk', 'path=/', 'pool=default');
  await run(t, '--project', 'p1', 'exec', 'c1', '--', 'sh', '-c', 'echo kept > /root/mark');
  await run(t, '--project', 'p1', 'stop', 'c1', '--force');
  await run(t, '--project', 'p1', 'snapshot', 'c1', 's0');

  await run(t, '--project', 'p1', 'copy', 'c1', 'c2', '--target-project', 'p2');
  t.deepEqual(await csv(t, '--project', 'p2', 'list', '-c', 'nS'), ['c2,1']);

  await run(t, '--project', 'p1', 'move', 'c1', '--target-project', 'p2');
  t.deepEqual(await csv(t, '--project', 'p1', 'list', '-c', 'n'), []);
  t.deepEqual(await csv(t, '--project', 'p2', 'list', '-c', 'nS'), ['c1,1', 'c2,1']);
  await run(t, '--project', 'p2', 'start', 'c1');
  t.is((await run(t, '--project', 'p2', 'exec', 'c1', '--', 'cat', '/root/mark')).trim(), 'kept');
  await fails(t, /running|stop/i, '--project', 'p2', 'move', 'c1', '--target-project', 'p1');

  const all = await csv(t, 'list', '--all-projects', '-c', 'en');
  t.deepEqual(all.sort(), ['p2,c1', 'p2,c2'], 'each row names its project');
  await run(t, '--project', 'p2', 'stop', 'c1', '--force');
  await run(t, '--project', 'p2', 'delete', 'c1', 'c2');
});

test.serial('lxc project rename and delete of empty projects; default refused', async (t) => {
  await run(t, 'project', 'rename', 'p1', 'p3');
  t.true((await csv(t, 'project', 'list')).some((r) => r.startsWith('p3,')));
  await fails(t, /default/, 'project', 'delete', 'default');
  await fails(t, /default/, 'project', 'rename', 'default', 'other');
  await run(t, 'project', 'delete', 'p3');
  await run(t, 'project', 'delete', 'p2');
  t.deepEqual((await csv(t, 'project', 'list')).map((r) => r.split(',')[0]), ['default (current)']);
  await fails(t, /not found/i, '--project', 'p3', 'list');
});
