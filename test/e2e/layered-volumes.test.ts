/**
 * Layered container volumes on `dir` (decision 0075), through the real `lxc` client: a privileged
 * container made from an image shares the image's unpacked files under its own overlay upper
 * layer instead of a copy, and everything that needs whole trees still gets them.
 */
import test from 'ava';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { projectRoot, startWithPool, stopDaemons, unmountUnder, type Daemon } from '../helpers/daemon.js';
import { lxc, lxcOk, python } from '../helpers/clients.js';
import { overlayMounts } from '../helpers/needs.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';

let d: Daemon;
let image: BusyboxImage;
let work: string;
let pool: string;
let dataDir: string;

const ok = (t: any, ...args: string[]) => lxcOk(t, d.socket, ...args);
const mounted = (dir: string) => statSync(path.join(dir, 'rootfs')).dev !== statSync(dir).dev;
const volume = (name: string) => path.join(pool, 'containers', name);
const upper = (name: string) => path.join(pool, 'containers-layers', name, 'upper');
const layered = (name: string) => existsSync(path.join(pool, 'containers-layers', name, 'base')) && mounted(volume(name));
const overlaySupported = overlayMounts();
const serial = overlaySupported ? test.serial : test.serial.skip;

test.before(async () => {
  if (!overlaySupported) return;
  image = buildBusyboxImage('gzip');
  work = mkdtempSync(path.join(tmpdir(), 'x2-layered-'));
  dataDir = mkdtempSync(path.join(tmpdir(), 'x2-layered-data-'));
  d = await startWithPool({ dir: dataDir, plugins: 'full' });
  pool = path.join(dataDir, 'storage-pools', 'default');
  const imported = await lxc(d.socket, 'image', 'import', image.unified, '--alias', 'bb');
  if (imported.status !== 0) throw new Error(`image import failed: ${imported.stderr}`);
});

test.after.always(async () => {
  if (!overlaySupported) return;
  const list = await lxc(d.socket, 'list', '--format', 'json').catch(() => undefined);
  for (const c of JSON.parse(list?.stdout || '[]')) await lxc(d.socket, 'delete', '--force', c.name);
  await stopDaemons();
  for (const name of existsSync(path.join(dataDir, 'containers')) ? readdirSync(path.join(dataDir, 'containers')) : []) {
    spawnSync('lxc-stop', ['-n', name, '-P', path.join(dataDir, 'containers'), '-k'], { stdio: 'ignore', timeout: 10000 });
  }
  unmountUnder(dataDir);
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(image.dir, { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
});

serial('a privileged container made from an image shares it: its volume holds only what was written, and a change stays its own', async (t) => {
  await ok(t, 'init', 'bb', 'x2a', '-c', 'security.privileged=true');
  await ok(t, 'init', 'bb', 'x2b', '-c', 'security.privileged=true');
  t.true(layered('x2a'), 'the rootfs is an overlay mount over the image');
  t.deepEqual(readdirSync(upper('x2a')), [], 'nothing was copied');
  t.true(existsSync(path.join(volume('x2a'), 'rootfs', 'bin', 'busybox')), 'the merged view shows the image files');
  t.true(existsSync(path.join(volume('x2a'), 'metadata.yaml')));

  // Written on the stopped instance through the file API: lands in the upper layer only.
  const note = path.join(work, 'note');
  writeFileSync(note, 'x2 was here\n');
  await ok(t, 'file', 'push', note, 'x2a/root/x2note');
  t.is(readFileSync(path.join(upper('x2a'), 'root', 'x2note'), 'utf8'), 'x2 was here\n');
  const pulled = path.join(work, 'pulled');
  await ok(t, 'file', 'pull', 'x2a/root/x2note', pulled);
  t.is(readFileSync(pulled, 'utf8'), 'x2 was here\n');
  t.not((await lxc(d.socket, 'file', 'pull', 'x2b/root/x2note', path.join(work, 'nope'))).status, 0, 'the other instance does not see it');

  // Running: templates, exec and the file API on the same tree.
  await ok(t, 'start', 'x2a');
  t.is((await ok(t, 'exec', 'x2a', '--', 'cat', '/etc/hostname')).trim(), 'x2a', 'the create template wrote into the layer');
  await ok(t, 'exec', 'x2a', '--', 'sh', '-c', 'echo inside > /x2run && rm /bin/ls');
  await ok(t, 'file', 'pull', 'x2a/x2run', pulled);
  t.is(readFileSync(pulled, 'utf8'), 'inside\n', 'the file API sees what the running container wrote');
  const imageRoot = path.join(pool, 'images', readdirSync(path.join(pool, 'images'))[0]!, 'rootfs');
  t.true(existsSync(path.join(imageRoot, 'bin', 'ls')), 'a delete in the instance leaves the image whole');
  t.false(existsSync(path.join(imageRoot, 'x2run')));
  await ok(t, 'start', 'x2b');
  t.is((await ok(t, 'exec', 'x2b', '--', 'sh', '-c', 'ls /bin/ls && cat /etc/hostname')).trim(), '/bin/ls\nx2b');
  await ok(t, 'stop', 'x2a', '--force');
  await ok(t, 'stop', 'x2b', '--force');
});

serial('an unprivileged or nesting container gets a plain copy, and a layered one turning unprivileged or nesting is flattened before its start', async (t) => {
  await ok(t, 'init', 'bb', 'x2u');
  t.false(existsSync(path.join(pool, 'containers-layers', 'x2u')));
  t.false(mounted(volume('x2u')), 'an id-mapped rootfs cannot be an overlay: copied as before');
  await ok(t, 'init', 'bb', 'x2f', '-c', 'security.privileged=true');
  t.true(layered('x2f'));
  await ok(t, 'config', 'set', 'x2f', 'security.privileged', 'false');
  await ok(t, 'start', 'x2f');
  t.false(existsSync(path.join(pool, 'containers-layers', 'x2f')), 'the layer is gone');
  t.false(mounted(volume('x2f')));
  t.is((await ok(t, 'exec', 'x2f', '--', 'sh', '-c', 'ls /bin/busybox && cat /etc/hostname')).trim(), '/bin/busybox\nx2f');
  await ok(t, 'delete', '--force', 'x2f');
  await ok(t, 'delete', 'x2u');
  // Nesting: the overlays a nested runtime makes cannot have an overlay as their upper layer.
  await ok(t, 'init', 'bb', 'x2n', '-c', 'security.privileged=true', '-c', 'security.nesting=true');
  t.false(existsSync(path.join(pool, 'containers-layers', 'x2n')), 'a nesting container gets a copy');
  await ok(t, 'delete', 'x2n');
  await ok(t, 'init', 'bb', 'x2g', '-c', 'security.privileged=true');
  t.true(layered('x2g'));
  await ok(t, 'config', 'set', 'x2g', 'security.nesting', 'true');
  await ok(t, 'start', 'x2g');
  t.false(existsSync(path.join(pool, 'containers-layers', 'x2g')), 'flattened before a nesting start');
  t.is((await ok(t, 'exec', 'x2g', '--', 'cat', '/etc/hostname')).trim(), 'x2g');
  await ok(t, 'delete', '--force', 'x2g');
});

serial('snapshot, restore, copy, export and publish of a layered container give whole trees', async (t) => {
  await ok(t, 'snapshot', 'x2a', 's1');
  const snap = path.join(pool, 'containers-snapshots', 'x2a', 's1');
  t.true(statSync(path.join(snap, 'rootfs', 'bin', 'busybox')).isFile(), 'the snapshot holds the whole tree');
  t.is(readFileSync(path.join(snap, 'rootfs', 'root', 'x2note'), 'utf8'), 'x2 was here\n');
  t.is(statSync(path.join(snap, 'rootfs')).dev, statSync(snap).dev, 'a plain directory, not a mount');

  const later = path.join(work, 'later');
  writeFileSync(later, 'after the snapshot\n');
  await ok(t, 'file', 'push', later, 'x2a/root/later');
  await ok(t, 'restore', 'x2a', 's1');
  t.not((await lxc(d.socket, 'file', 'pull', 'x2a/root/later', path.join(work, 'gone'))).status, 0, 'the restore dropped the later file');
  await ok(t, 'file', 'pull', 'x2a/root/x2note', path.join(work, 'kept'));
  t.is(readFileSync(path.join(work, 'kept'), 'utf8'), 'x2 was here\n');
  t.false(existsSync(path.join(pool, 'containers-layers', 'x2a')), 'a restored volume is plain');
  await ok(t, 'start', 'x2a');
  t.is((await ok(t, 'exec', 'x2a', '--', 'cat', '/x2run')).trim(), 'inside');
  await ok(t, 'stop', 'x2a', '--force');

  await ok(t, 'copy', 'x2b', 'x2c');
  t.false(mounted(volume('x2c')), 'a copy is a whole plain tree');
  t.true(statSync(path.join(volume('x2c'), 'rootfs', 'bin', 'busybox')).isFile());

  const tarball = path.join(work, 'x2b.tar.gz');
  await ok(t, 'export', 'x2b', tarball, '--instance-only');
  const listing = spawnSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).stdout;
  t.regex(listing, /backup\/container\/rootfs\/bin\/busybox/);
  t.regex(listing, /backup\/container\/rootfs\/etc\/hostname/);

  await ok(t, 'publish', 'x2b', '--alias', 'x2pub');
  const published = JSON.parse(await ok(t, 'image', 'list', '--format', 'json')).find((i: any) => i.aliases.some((a: any) => a.name === 'x2pub'));
  t.true(published.size > 200_000, `the image holds the busybox binary (${published.size} bytes)`);
  await ok(t, 'init', 'x2pub', 'x2p');
  await ok(t, 'start', 'x2p');
  t.is((await ok(t, 'exec', 'x2p', '--', 'sh', '-c', 'ls /bin/ls; cat /etc/hostname')).trim(), '/bin/ls\nx2p');
  await ok(t, 'delete', '--force', 'x2p');
  await ok(t, 'image', 'delete', 'x2pub');
  await ok(t, 'delete', 'x2c');
});

serial('rename keeps a layered volume layered, and an image deleted while layered volumes use it stays until the last one goes', async (t) => {
  await ok(t, 'move', 'x2b', 'x2b2');
  t.true(layered('x2b2'));
  t.false(existsSync(volume('x2b')));
  await ok(t, 'init', 'bb', 'x2d', '-c', 'security.privileged=true');
  await ok(t, 'image', 'delete', 'bb');
  t.is(readdirSync(path.join(pool, 'images')).length, 0, 'the image volume is gone from images/');
  t.is(readdirSync(path.join(pool, 'images-retired')).length, 1, 'kept aside for its users');
  await ok(t, 'start', 'x2d');
  t.is((await ok(t, 'exec', 'x2d', '--', 'cat', '/etc/hostname')).trim(), 'x2d');
  await ok(t, 'delete', '--force', 'x2d');
  t.is(readdirSync(path.join(pool, 'images-retired')).length, 1, 'still used by x2b2');
  await ok(t, 'start', 'x2b2');
  t.is((await ok(t, 'exec', 'x2b2', '--', 'cat', '/etc/hostname')).trim(), 'x2b2', 'the rename template ran in the layer');
  await ok(t, 'delete', '--force', 'x2b2');
  t.is(readdirSync(path.join(pool, 'images-retired')).length, 0, 'the last user took the retired image along');
  t.deepEqual(readdirSync(path.join(pool, 'containers-layers')), []);
});

serial('a daemon restart keeps running and stopped layered containers, and mounts again what is not mounted', async (t) => {
  const imported = await lxc(d.socket, 'image', 'import', image.unified, '--alias', 'bb');
  t.is(imported.status, 0, imported.stderr);
  await ok(t, 'init', 'bb', 'x2r', '-c', 'security.privileged=true');
  await ok(t, 'init', 'bb', 'x2s', '-c', 'security.privileged=true');
  await ok(t, 'start', 'x2r');
  await ok(t, 'exec', 'x2r', '--', 'sh', '-c', 'echo before > /x2restart');
  await d.stop();
  // As after a host reboot: the stopped one's mount is gone; and as after a crash in a delete: a layer without its volume.
  t.is(spawnSync('umount', [path.join(volume('x2s'), 'rootfs')]).status, 0);
  for (const p of ['upper', 'work']) spawnSync('mkdir', ['-p', path.join(pool, 'containers-layers', 'x2ghost', p)]);
  writeFileSync(path.join(pool, 'containers-layers', 'x2ghost', 'base'), 'images-retired/nothing\n');
  d = await startWithPool({ dir: dataDir, plugins: 'full' });
  t.false(existsSync(path.join(pool, 'containers-layers', 'x2ghost')), 'a stray layer is dropped at start');
  t.true(layered('x2s'), 'mounted again at start');
  t.true(layered('x2r'));
  t.is((await ok(t, 'exec', 'x2r', '--', 'cat', '/x2restart')).trim(), 'before');
  await ok(t, 'file', 'pull', 'x2r/x2restart', path.join(work, 'restart'));
  t.is(readFileSync(path.join(work, 'restart'), 'utf8'), 'before\n');
  await ok(t, 'start', 'x2s');
  t.is((await ok(t, 'exec', 'x2s', '--', 'cat', '/etc/hostname')).trim(), 'x2s');
  await ok(t, 'delete', '--force', 'x2r');
  await ok(t, 'delete', '--force', 'x2s');
  t.false(existsSync(volume('x2r')));
  t.deepEqual(readdirSync(path.join(pool, 'containers-layers')), []);
});

serial('a layered container moves to another dir pool as a whole plain tree, and takes pushes while it runs', async (t) => {
  await ok(t, 'storage', 'create', 'x2pool2', 'dir');
  await ok(t, 'init', 'bb', 'x2m', '-c', 'security.privileged=true');
  await ok(t, 'start', 'x2m');
  const pushed = path.join(work, 'running-push');
  writeFileSync(pushed, 'pushed while running\n');
  await ok(t, 'file', 'push', pushed, 'x2m/root/pushed');
  t.is((await ok(t, 'exec', 'x2m', '--', 'cat', '/root/pushed')).trim(), 'pushed while running', 'the container sees a push through the host view at once');
  await ok(t, 'stop', 'x2m', '--force');
  await ok(t, 'move', 'x2m', '--storage', 'x2pool2');
  t.false(existsSync(path.join(pool, 'containers-layers', 'x2m')), 'the layer left with the old volume');
  const moved = path.join(dataDir, 'storage-pools', 'x2pool2', 'containers', 'x2m');
  t.is(statSync(path.join(moved, 'rootfs')).dev, statSync(moved).dev, 'a plain tree on the new pool');
  t.true(statSync(path.join(moved, 'rootfs', 'bin', 'busybox')).isFile());
  await ok(t, 'start', 'x2m');
  t.is((await ok(t, 'exec', 'x2m', '--', 'cat', '/root/pushed')).trim(), 'pushed while running');
  await ok(t, 'delete', '--force', 'x2m');
  await ok(t, 'storage', 'delete', 'x2pool2');
});

serial('a layered container moved to another project keeps its layer under its new volume name', async (t) => {
  await ok(t, 'project', 'create', 'x2proj', '-c', 'features.images=false', '-c', 'features.profiles=false');
  await ok(t, 'init', 'bb', 'x2pm', '-c', 'security.privileged=true');
  const note = path.join(work, 'project-note');
  writeFileSync(note, 'moving projects\n');
  await ok(t, 'file', 'push', note, 'x2pm/root/note');
  await ok(t, 'move', 'x2pm', '--target-project', 'x2proj');
  t.false(existsSync(path.join(pool, 'containers-layers', 'x2pm')));
  t.true(layered('x2proj_x2pm'), 'layered under the project-prefixed name');
  t.is(readFileSync(path.join(upper('x2proj_x2pm'), 'root', 'note'), 'utf8'), 'moving projects\n');
  await ok(t, 'start', 'x2pm', '--project', 'x2proj');
  t.is((await ok(t, 'exec', 'x2pm', '--project', 'x2proj', '--', 'cat', '/root/note')).trim(), 'moving projects');
  await ok(t, 'delete', '--force', 'x2pm', '--project', 'x2proj');
  t.false(existsSync(path.join(pool, 'containers-layers', 'x2proj_x2pm')));
  await ok(t, 'project', 'delete', 'x2proj');
});

serial('pylxd: a privileged container from an image is layered, takes files stopped and running, and a delete drops the layer', async (t) => {
  const run = await python(path.join(projectRoot, 'test', 'e2e', 'pylxd_layered.py'), [d.socket, 'x2py']);
  t.is(run.status, 0, run.stderr);
  const out = JSON.parse(run.stdout);
  t.is(out.stopped_get, 'from pylxd\n');
  t.is(out.exec, 'from pylxd\nx2py\n');
  t.is(out.running_exec, 'while running\n');
  t.true(layered('x2py'), 'layered');
  t.is(readFileSync(path.join(upper('x2py'), 'root', 'py-note'), 'utf8'), 'from pylxd\n', 'what pylxd wrote is in the upper layer');
  t.false(existsSync(path.join(upper('x2py'), 'bin')), 'the image files are not');
  await ok(t, 'delete', 'x2py');
  t.false(existsSync(path.join(pool, 'containers-layers', 'x2py')), 'the layer went with the delete');
  t.false(existsSync(volume('x2py')));
});
