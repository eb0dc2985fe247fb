/**
 * btrfs pools through the real `lxc` client: create on a loop file, list/info/show/edit/get/set/
 * delete, launch on the pool (a clone of the image's subvolume), snapshots as read-only
 * subvolumes, moves between a dir and a btrfs pool, a pool whose loop file is gone at boot, and a
 * daemon killed in the middle of a copy into a btrfs pool.
 */
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { projectRoot, startDaemon, stopDaemons, waitFor, killContainers, type Daemon } from '../helpers/daemon.js';
import { lxc, lxcOk, lxcWithInput, python } from '../helpers/clients.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';

let image: BusyboxImage;

const loopsOf = (file: string) => spawnSync('losetup', ['-n', '-O', 'NAME', '-j', file], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean);
const btrfsMounts = (dir: string) => spawnSync('grep', ['-c', ` ${dir}/`, '/proc/mounts'], { encoding: 'utf8' }).stdout.trim();
const subvolumeShow = (at: string) => spawnSync('btrfs', ['subvolume', 'show', at], { encoding: 'utf8' });
const field = (text: string, name: string) => new RegExp(`^\\s*${name}:\\s*(\\S+)`, 'm').exec(text)?.[1];

async function start(dir?: string): Promise<Daemon> {
  const d = await startDaemon({ plugins: 'full', dir, args: ['--init', 'auto'] });
  await waitFor(async () => (await d.request('GET', '/1.0/storage-pools')).json?.metadata?.length >= 1, 10000, 'the init pool');
  return d;
}

/** Containers and pools out, then the daemon and its directory (a pool left mounted would keep a loop device). */
async function teardown(d: Daemon, dir?: string): Promise<void> {
  const list = await lxc(d.socket, 'list', '--format', 'json').catch(() => undefined);
  for (const c of JSON.parse(list?.stdout || '[]')) await lxc(d.socket, 'delete', '--force', c.name);
  for (const p of JSON.parse((await lxc(d.socket, 'storage', 'list', '--format', 'json')).stdout || '[]')) {
    if (p.driver === 'btrfs') await lxc(d.socket, 'storage', 'delete', p.name);
  }
  await d.stop();
  if (dir) {
    killContainers(dir);
    rmSync(dir, { recursive: true, force: true });
  }
}

test.before(() => {
  image = buildBusyboxImage('gzip');
});

test.after.always(async () => {
  await stopDaemons();
  rmSync(image.dir, { recursive: true, force: true });
});

test.serial('lxc storage create/list/info/show/edit/get/set/delete on a btrfs loop file (storage_btrfs_mount_options)', async (t) => {
  const d = await start();
  try {
    const ok = (...args: string[]) => lxcOk(t, d.socket, ...args);
    await ok('storage', 'create', 'p', 'btrfs', 'size=2GiB');
    const loopFile = path.join(d.dir, 'disks', 'p.img');
    t.true(existsSync(loopFile));
    t.is(loopsOf(loopFile).length, 1, 'one loop device while mounted');
    const list = JSON.parse(await ok('storage', 'list', '--format', 'json'));
    const p = list.find((x: any) => x.name === 'p');
    t.is(p.driver, 'btrfs');
    t.is(p.status, 'Created');
    t.deepEqual(p.config, { size: '2GiB', source: loopFile });
    t.is(readFileSync('/proc/mounts', 'utf8').split('\n').filter((l) => l.includes(path.join(d.dir, 'storage-pools', 'p')) && l.includes('user_subvol_rm_allowed')).length, 1, 'mounted with the default options');
    t.regex(await ok('storage', 'list'), /\| p\s+\| btrfs\s+\|/);
    const info = await ok('storage', 'info', 'p');
    t.regex(info, /driver: btrfs/);
    t.regex(info, /space used: .*\n\s*total space: 2\.00GiB/);
    t.regex(await ok('storage', 'show', 'p'), /size: 2GiB/);
    t.is((await ok('storage', 'get', 'p', 'size')).trim(), '2GiB');
    await ok('storage', 'set', 'p', 'btrfs.mount_options', 'user_subvol_rm_allowed,noatime');
    t.true(readFileSync('/proc/mounts', 'utf8').split('\n').some((l) => l.includes(path.join(d.dir, 'storage-pools', 'p')) && l.includes('noatime')), 'remounted with the new options');
    t.is((await ok('storage', 'get', 'p', 'btrfs.mount_options')).trim(), 'user_subvol_rm_allowed,noatime');
    const edited = await lxcWithInput(d.socket, `description: fast pool\nconfig:\n  size: 2GiB\n  source: ${loopFile}\n  btrfs.mount_options: user_subvol_rm_allowed\n`, 'storage', 'edit', 'p');
    t.is(edited.status, 0, edited.stderr);
    t.is(JSON.parse(await ok('storage', 'list', '--format', 'json')).find((x: any) => x.name === 'p').description, 'fast pool');
    await ok('storage', 'set', 'p', 'size', '3GiB');
    t.regex(await ok('storage', 'info', 'p'), /total space: 3\.00GiB/, 'the loop file and the file system grew');
    const shrink = await lxc(d.socket, 'storage', 'set', 'p', 'size', '1GiB');
    t.regex(shrink.stderr, /cannot shrink/);
    t.true(readFileSync('/proc/mounts', 'utf8').split('\n').some((l) => l.includes(path.join(d.dir, 'storage-pools', 'p')) && l.includes('user_subvol_rm_allowed')), 'mounted with the edited options');
    const onDir = await lxc(d.socket, 'storage', 'set', 'default', 'btrfs.mount_options', 'noatime');
    t.regex(onDir.stderr, /Invalid option "btrfs.mount_options" for storage driver "dir"/);

    // Bad input: clear errors, nothing left on the host.
    const badSize = await lxc(d.socket, 'storage', 'create', 'q', 'btrfs', 'size=lots');
    t.regex(badSize.stderr, /Invalid size "lots"/);
    const plainDir = mkdtempSync(path.join(tmpdir(), 'corral-notbtrfs-'));
    const notBtrfs = await lxc(d.socket, 'storage', 'create', 'q', 'btrfs', `source=${plainDir}`);
    t.regex(notBtrfs.stderr, /is not on a btrfs file system/);
    const inside = await lxc(d.socket, 'storage', 'create', 'q', 'btrfs', `source=${path.join(d.dir, 'somewhere')}`);
    t.regex(inside.stderr, /inside the daemon's data directory/);
    rmSync(plainDir, { recursive: true });
    t.false(existsSync(path.join(d.dir, 'disks', 'q.img')));
    t.false(JSON.parse(await ok('storage', 'list', '--format', 'json')).some((x: any) => x.name === 'q'));

    await ok('storage', 'delete', 'p');
    t.false(existsSync(loopFile), 'the loop file is gone');
    t.deepEqual(loopsOf(loopFile), [], 'no loop device is left');
    t.is(btrfsMounts(d.dir), '0', 'nothing is left mounted');
  } finally {
    await teardown(d);
  }
});

test.serial('lxc launch -s on btrfs clones the image subvolume; snapshots are read-only subvolumes; lxc move --storage between dir and btrfs', async (t) => {
  const d = await start();
  try {
    const ok = (...args: string[]) => lxcOk(t, d.socket, ...args);
    await ok('image', 'import', image.unified, '--alias', 'bb');
    await ok('storage', 'create', 'p', 'btrfs', 'size=2GiB');
    await ok('launch', 'bb', 'c', '-s', 'p');
    t.is((await ok('exec', 'c', '--', 'cat', '/etc/hostname')).trim(), 'c');
    const root = path.join(d.dir, 'storage-pools', 'p');
    const fingerprint = readdirSync(path.join(root, 'images'))[0]!;
    const imageUuid = field(subvolumeShow(path.join(root, 'images', fingerprint)).stdout, 'UUID');
    const container = subvolumeShow(path.join(root, 'containers', 'c'));
    t.is(container.status, 0, 'the instance volume is a subvolume');
    t.is(field(container.stdout, 'Parent UUID'), imageUuid, 'and a snapshot of the unpacked image');

    await ok('exec', 'c', '--', 'sh', '-c', 'echo before > /root/state');
    await ok('snapshot', 'c', 's1');
    const snap = subvolumeShow(path.join(root, 'containers-snapshots', 'c', 's1'));
    t.regex(snap.stdout, /Flags:\s+readonly/);
    await ok('exec', 'c', '--', 'sh', '-c', 'echo after > /root/state');
    await ok('restore', 'c', 's1');
    t.is((await ok('exec', 'c', '--', 'cat', '/root/state')).trim(), 'before');

    // To the dir pool and back, snapshots included.
    await ok('stop', 'c', '--force');
    await ok('move', 'c', '--storage', 'default');
    t.is(JSON.parse(await ok('list', 'c', '--format', 'json'))[0].expanded_devices.root.pool, 'default');
    t.true(existsSync(path.join(d.dir, 'storage-pools', 'default', 'containers', 'c', 'rootfs', 'root', 'state')));
    t.false(existsSync(path.join(root, 'containers', 'c')), 'gone from the btrfs pool');
    await ok('move', 'c', '--storage', 'p');
    t.is(subvolumeShow(path.join(root, 'containers', 'c')).status, 0);
    t.is(subvolumeShow(path.join(root, 'containers-snapshots', 'c', 's1')).status, 0, 'the snapshot came back as a subvolume');
    await ok('start', 'c');
    t.is((await ok('exec', 'c', '--', 'cat', '/root/state')).trim(), 'before');
    // A copy between pools keeps the source.
    await ok('copy', 'c', 'c2', '-s', 'default');
    t.is((await ok('storage', 'volume', 'list', 'default', '--format', 'csv', '-c', 'tn')).includes('container,c2'), true);
    const busy = await lxc(d.socket, 'storage', 'delete', 'p');
    t.regex(busy.stderr, /in use/);
    await ok('delete', '--force', 'c');
    await ok('delete', '--force', 'c2');
  } finally {
    await teardown(d);
  }
});

test.serial('a btrfs pool whose loop file is gone at boot is unavailable with a warning, and the daemon still boots', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-btrfs-boot-'));
  let d = await start(dir);
  try {
    await lxcOk(t, d.socket, 'storage', 'create', 'gone', 'btrfs', 'size=1GiB');
    await d.stop();
    const loopFile = path.join(dir, 'disks', 'gone.img');
    t.deepEqual(loopsOf(loopFile), [], 'a clean stop unmounts and frees the loop device');
    rmSync(loopFile);
    d = await start(dir);
    const pools = JSON.parse(await lxcOk(t, d.socket, 'storage', 'list', '--format', 'json'));
    t.is(pools.find((p: any) => p.name === 'gone').status, 'Unavailable');
    t.is(pools.find((p: any) => p.name === 'default').status, 'Created');
    t.regex(await lxcOk(t, d.socket, 'warning', 'list', '--format', 'csv'), /Storage pool unavailable/);
    const launch = await lxc(d.socket, 'init', 'nothing', 'x', '-s', 'gone');
    t.not(launch.status, 0);
    await lxcOk(t, d.socket, 'storage', 'delete', 'gone');
  } finally {
    await teardown(d, dir);
  }
});

test.serial('kill -9 during a copy into a btrfs pool: after restart no half volume, no extra loop device, no scratch subvolume', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-btrfs-kill-'));
  let d = await start(dir);
  try {
    const ok = (...args: string[]) => lxcOk(t, d.socket, ...args);
    await ok('image', 'import', image.unified, '--alias', 'bb');
    await ok('init', 'bb', 'big');
    // Enough bytes that the copy is still running when the daemon dies.
    const rootfs = path.join(dir, 'storage-pools', 'default', 'containers', 'big', 'rootfs');
    for (let i = 0; i < 40; i++) writeFileSync(path.join(rootfs, `blob${i}`), Buffer.alloc(8 * 1024 * 1024, i));
    await ok('storage', 'create', 'p', 'btrfs', 'size=2GiB');
    const loopFile = path.join(dir, 'disks', 'p.img');
    const containers = path.join(dir, 'storage-pools', 'p', 'containers');
    const copy = lxc(d.socket, 'copy', 'big', 'big2', '-s', 'p');
    await waitFor(() => readdirSync(containers).some((e) => e.startsWith('.building-')), 20000, 'the copy to start');
    d.child.kill('SIGKILL');
    await copy;
    await waitFor(() => d.child.exitCode !== null || d.child.signalCode !== null, 5000, 'the daemon to die');
    d = await start(dir);
    t.deepEqual(readdirSync(containers).filter((e) => e.startsWith('.')), [], 'the half-filled subvolume is gone');
    t.is(loopsOf(loopFile).length, 1, 'the mount a killed daemon left is reused, not doubled');
    const subvolumes = spawnSync('btrfs', ['subvolume', 'list', '-o', containers], { encoding: 'utf8' }).stdout;
    t.notRegex(subvolumes, /\.building-/);
    const big2 = await lxc(d.socket, 'list', 'big2', '--format', 'json');
    const listed = JSON.parse(big2.stdout || '[]');
    if (listed.length) {
      t.is(readdirSync(path.join(containers, 'big2', 'rootfs')).filter((e) => e.startsWith('blob')).length, 40, 'a copy that is listed is whole');
    } else {
      t.false(existsSync(path.join(containers, 'big2')), 'or absent');
    }
  } finally {
    await teardown(d, dir);
  }
});

test.serial('a vendor driver outside plugins/ is picked up with --plugins edge,storage-example: lxc storage create and launch on it', async (t) => {
  const d = await startDaemon({ plugins: 'edge,storage-example', args: ['--init', 'auto'] });
  try {
    const ok = (...args: string[]) => lxcOk(t, d.socket, ...args);
    const drivers = JSON.parse(await ok('query', '/1.0')).environment.storage_supported_drivers.map((x: any) => x.Name);
    t.true(drivers.includes('example'));
    t.false(drivers.includes('btrfs'), 'btrfs is not in the edge set');
    await ok('image', 'import', image.unified, '--alias', 'bb');
    await ok('storage', 'create', 'vend', 'example');
    t.regex(await ok('storage', 'show', 'vend'), /driver: example/);
    await ok('launch', 'bb', 'v1', '-s', 'vend');
    t.is((await ok('exec', 'v1', '--', 'cat', '/etc/hostname')).trim(), 'v1');
    const snap = await lxc(d.socket, 'snapshot', 'v1', 's0');
    t.regex(snap.stderr, /Storage driver "example" does not support snapshots/, 'the family answers for a missing capability');
    await ok('delete', '--force', 'v1');
    await ok('storage', 'delete', 'vend');
    t.false(existsSync(path.join(d.dir, 'storage-pools', 'vend')));
  } finally {
    await teardown(d);
  }
});

test.serial('pylxd: btrfs storage pool create, get, resources, save, patch, delete', async (t) => {
  const d = await start();
  try {
    const run = await python(path.join(projectRoot, 'test', 'e2e', 'pylxd_btrfs.py'), [d.socket]);
    t.is(run.status, 0, run.stderr);
    const out = JSON.parse(run.stdout);
    t.true(out.exists);
    t.is(out.driver, 'btrfs');
    t.is(out.status, 'Created');
    t.deepEqual(out.config, { size: '1GiB', source: path.join(d.dir, 'disks', 'pyb.img') });
    t.is(out.total, 1024 ** 3);
    t.is(out.description, 'from pylxd');
    t.is(out.mount_options, 'user_subvol_rm_allowed,noatime');
    t.regex(out.bad, /Invalid size "huge"/);
    t.false(out.exists_after);
    t.deepEqual(loopsOf(path.join(d.dir, 'disks', 'pyb.img')), []);
  } finally {
    await teardown(d);
  }
});
