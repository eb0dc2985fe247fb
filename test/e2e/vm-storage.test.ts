/**
 * A virtual machine's disk on the storage paths, through lxc, with the VMs stopped (their disks
 * are read and marked on the host with debugfs, the guests never boot): snapshot and restore,
 * export in the reference's layout (backup/virtual-machine/ and virtual-machine.img, snapshots
 * under virtual-machine-snapshots/, sparse) and import back, publish (a compressed qcow2
 * rootfs.img) and an instance made from the published image, copy and rename, and the reference
 * daemon taking corral's VM backup into its database.
 */
import test from 'ava';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startWithPool, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { lxc, lxcOk } from '../helpers/clients.js';
import { serialUnless } from '../helpers/needs.js';
import { referenceUnavailable, startReference } from '../helpers/reference-daemon.js';
import { importTestVmImage, vmProblem } from '../helpers/vm-image.js';

const serial = serialUnless(vmProblem());
let d: Daemon;
let work: string;
const ok = (t: any, ...args: string[]) => lxcOk(t, d.socket, ...args);
const SIZE = 512 * 1024 * 1024;

const disk = (name: string, snapshot?: string) => snapshot
  ? path.join(d.dir, 'storage-pools/default/virtual-machines-snapshots', name, snapshot, 'root.img')
  : path.join(d.dir, 'storage-pools/default/virtual-machines', name, 'root.img');

/** Write `text` as /marker on the ext4 file system of a stopped VM's disk. */
function mark(file: string, text: string): void {
  const src = path.join(work, 'marker');
  writeFileSync(src, text);
  const cmds = path.join(work, 'cmds');
  writeFileSync(cmds, `rm /marker\nwrite ${src} /marker\n`);
  execFileSync('debugfs', ['-w', '-f', cmds, file], { stdio: 'ignore' });
}

/** /marker of a disk ('' when there is none). */
function marker(file: string): string {
  return spawnSync('debugfs', ['-R', 'cat /marker', file], { encoding: 'utf8' }).stdout;
}

/** Bytes the file takes on disk. */
const allocated = (file: string) => statSync(file).blocks * 512;

test.before(async () => {
  if (vmProblem()) return;
  work = mkdtempSync(path.join(tmpdir(), 'corral-vm-storage-'));
  d = await startWithPool({ plugins: 'full' });
  await importTestVmImage(d.socket, 'busybox-vm');
});

test.after.always(async () => {
  for (const name of ['v1', 'v2', 'v3', 'v4']) await lxc(d.socket, 'delete', '--force', name).catch(() => undefined);
  await stopDaemons();
  if (work) rmSync(work, { recursive: true, force: true });
});

serial('a VM disk is a sparse copy of the image grown to the root disk size; a snapshot keeps it and a restore brings it back', async (t) => {
  await ok(t, 'init', 'busybox-vm', 'v1', '--vm', '-d', `root,size=${SIZE}`);
  t.is(statSync(disk('v1')).size, SIZE);
  t.true(allocated(disk('v1')) < 128 * 1024 * 1024, `${allocated(disk('v1'))} bytes allocated`);
  t.is(statSync(disk('v1')).mode & 0o777, 0o600, 'the disk is root\'s alone');
  mark(disk('v1'), 'one');
  await ok(t, 'snapshot', 'v1', 's1');
  t.is(marker(disk('v1', 's1')), 'one');
  mark(disk('v1'), 'two');
  await ok(t, 'restore', 'v1', 's1');
  t.is(marker(disk('v1')), 'one');
});

serial('lxc export of a VM writes the reference\'s layout with sparse disks, and lxc import brings the VM back with its snapshot', async (t) => {
  const tarball = path.join(work, 'v1.tar.gz');
  await ok(t, 'export', 'v1', tarball);
  t.true(statSync(tarball).size < 96 * 1024 * 1024, `${statSync(tarball).size} bytes`);
  const listing = execFileSync('tar', ['-tvzf', tarball], { encoding: 'utf8' }).split('\n').filter(Boolean);
  const members = listing.map((line) => line.split(/\s+/).pop()!);
  for (const wanted of ['backup/index.yaml', 'backup/virtual-machine/', 'backup/virtual-machine/backup.yaml', 'backup/virtual-machine/metadata.yaml',
    'backup/virtual-machine.img', 'backup/virtual-machine-snapshots/s1/', 'backup/virtual-machine-snapshots/s1.img']) {
    t.true(members.includes(wanted), `${wanted} in\n${members.join('\n')}`);
  }
  t.false(members.some((m) => m.endsWith('root.img')), 'the disk is not archived twice');
  const size = (member: string) => Number(listing.find((line) => line.endsWith(` ${member}`))!.split(/\s+/)[2]);
  t.is(size('backup/virtual-machine.img'), SIZE);
  t.regex(execFileSync('tar', ['-xzOf', tarball, 'backup/index.yaml'], { encoding: 'utf8' }), /type: virtual-machine/);

  await ok(t, 'import', tarball, 'v2');
  const info = JSON.parse(await ok(t, 'list', 'v2', '--format', 'json'))[0];
  t.is(info.type, 'virtual-machine');
  t.is(info.snapshots?.length ?? JSON.parse(await ok(t, 'query', '/1.0/instances/v2/snapshots')).length, 1);
  t.is(marker(disk('v2')), 'one');
  t.is(marker(disk('v2', 's1')), 'one');
  t.is(statSync(disk('v2')).size, SIZE);
  t.true(allocated(disk('v2')) < 128 * 1024 * 1024, 'the imported disk stays sparse');
});

serial('lxc publish of a VM makes a virtual-machine image with a compressed qcow2 disk, and an instance made from it holds the VM\'s disk', async (t) => {
  await ok(t, 'publish', 'v1', '--alias', 'vmpub');
  const image = JSON.parse(await ok(t, 'image', 'list', 'vmpub', '--format', 'json'))[0];
  t.is(image.type, 'virtual-machine');
  t.true(image.size < 64 * 1024 * 1024, `${image.size} bytes`);
  const exported = path.join(work, 'vmpub');
  await ok(t, 'image', 'export', 'vmpub', exported);
  const file = `${exported}.tar.gz`;
  const members = execFileSync('tar', ['-tzf', file], { encoding: 'utf8' }).split('\n').filter(Boolean);
  t.deepEqual(members.sort(), ['metadata.yaml', 'rootfs.img']);
  execFileSync('tar', ['-xzf', file, '-C', work, 'rootfs.img']);
  t.regex(execFileSync('qemu-img', ['info', path.join(work, 'rootfs.img')], { encoding: 'utf8' }), /file format: qcow2/);

  await ok(t, 'init', 'vmpub', 'v3', '--vm', '-d', `root,size=${SIZE}`);
  t.is(marker(disk('v3')), 'one');
});

serial('lxc copy and lxc move (rename) of a VM carry its disk and snapshots', async (t) => {
  await ok(t, 'copy', 'v1', 'v4');
  t.is(marker(disk('v4')), 'one');
  t.is(marker(disk('v4', 's1')), 'one');
  await ok(t, 'move', 'v4', 'v5');
  t.is(marker(disk('v5')), 'one');
  t.is((await lxc(d.socket, 'info', 'v4')).status, 1);
});

const withReference = serialUnless(vmProblem() ?? referenceUnavailable());

serial('lxc move --storage takes a VM with its disk and snapshots to another pool', async (t) => {
  const source = path.join(work, 'pool2');
  await ok(t, 'storage', 'create', 'pool2', 'dir', `source=${source}`);
  try {
    await ok(t, 'move', 'v5', '--storage', 'pool2');
    const moved = path.join(source, 'virtual-machines/v5/root.img');
    t.is(marker(moved), 'one');
    t.is(marker(path.join(source, 'virtual-machines-snapshots/v5/s1/root.img')), 'one');
    t.true(allocated(moved) < 128 * 1024 * 1024, 'the moved disk stays sparse');
    t.regex(await ok(t, 'config', 'device', 'get', 'v5', 'root', 'pool'), /^pool2/);
  } finally {
    await lxc(d.socket, 'delete', '--force', 'v5');
    await lxc(d.socket, 'storage', 'delete', 'pool2');
  }
});

serial('on a btrfs pool a VM\'s volume is a subvolume whose disk is cloned from the image\'s without a copy; its snapshot is a subvolume too', async (t) => {
  await ok(t, 'storage', 'create', 'bpool', 'btrfs', 'size=2GiB');
  const mount = path.join(d.dir, 'storage-pools/bpool');
  try {
    await ok(t, 'init', 'busybox-vm', 'b1', '--vm', '-s', 'bpool', '-d', `root,size=${SIZE}`);
    const volume = path.join(mount, 'virtual-machines/b1');
    t.is(spawnSync('btrfs', ['subvolume', 'show', volume]).status, 0, 'the volume is a subvolume');
    const file = path.join(volume, 'root.img');
    t.is(statSync(file).size, SIZE);
    // A clone shares the image volume's extents: btrfs counts them once ("shared"), not twice.
    const usage = spawnSync('btrfs', ['filesystem', 'du', '-s', '--raw', volume], { encoding: 'utf8' }).stdout.trim().split('\n').pop()!.trim().split(/\s+/).map(Number);
    t.true(usage[1]! < 8 * 1024 * 1024, `exclusive bytes of the clone: ${usage[1]} (total ${usage[0]}, shared ${usage[2]})`);
    mark(file, 'bt');
    await ok(t, 'snapshot', 'b1', 'bs');
    t.is(spawnSync('btrfs', ['subvolume', 'show', path.join(mount, 'virtual-machines-snapshots/b1/bs')]).status, 0);
    mark(file, 'bt2');
    await ok(t, 'restore', 'b1', 'bs');
    t.is(marker(path.join(mount, 'virtual-machines/b1/root.img')), 'bt');
    await ok(t, 'delete', 'b1');
    await ok(t, 'storage', 'delete', 'bpool');
  } finally {
    await lxc(d.socket, 'delete', '--force', 'b1');
    await lxc(d.socket, 'storage', 'delete', 'bpool');
  }
});

serial('a project\'s limits.virtual-machines counts VMs and refuses one more, leaving nothing behind', async (t) => {
  await ok(t, 'project', 'create', 'vmcap', '-c', 'features.images=false', '-c', 'features.profiles=false', '-c', 'limits.virtual-machines=1');
  try {
    await ok(t, 'init', 'busybox-vm', 'w1', '--vm', '--project', 'vmcap', '-d', `root,size=${SIZE}`);
    const refused = await lxc(d.socket, 'init', 'busybox-vm', 'w2', '--vm', '--project', 'vmcap', '-d', `root,size=${SIZE}`);
    t.is(refused.status, 1);
    t.regex(refused.stderr, /limits\.virtual-machines|virtual machines/i);
    t.is((await lxc(d.socket, 'info', 'w2', '--project', 'vmcap')).status, 1);
    t.deepEqual(JSON.parse(await ok(t, 'list', '--project', 'vmcap', '--format', 'json')).map((i: any) => i.name), ['w1']);
  } finally {
    await lxc(d.socket, 'delete', '--force', 'w1', '--project', 'vmcap');
    await lxc(d.socket, 'project', 'delete', 'vmcap');
  }
});

/**
 * The reference reads the archive (index, layout, config) and then refuses to make the record of a
 * virtual machine on a host without vhost_vsock, as every host of this kind is: whether it takes
 * the VM into its database depends on that module, and the test says which happened.
 */
withReference('the reference daemon reads corral\'s VM backup and takes it, or refuses only for want of its VM driver', async (t) => {
  const ref = await startReference();
  try {
    const tarball = path.join(work, 'v1.tar.gz');
    const imported = await ref.call('POST', '/1.0/instances', readFileSync(tarball), { 'content-type': 'application/octet-stream', 'X-LXD-name': 'fromcorral' });
    if (imported.op?.status !== 'Success') {
      t.regex(imported.op?.err ?? imported.json?.error ?? '', /Failed creating instance record: Instance type "virtual-machine" is not supported on this server/, `${imported.op?.err ?? imported.body}`);
      t.log(`the reference has no VM driver here: ${imported.op?.err}`);
      return;
    }
    const info = (await ref.request('GET', '/1.0/instances/fromcorral')).json.metadata;
    t.is(info?.type, 'virtual-machine');
    t.deepEqual((await ref.request('GET', '/1.0/instances/fromcorral/snapshots')).json.metadata, ['/1.0/instances/fromcorral/snapshots/s1']);
    t.is(marker(path.join(ref.dir, 'storage-pools/default/virtual-machines/fromcorral/root.img')), 'one');
  } finally {
    await ref.stop();
  }
});
