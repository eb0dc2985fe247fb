/**
 * Disks of a VM other than its root, through the real `lxc` client: a block volume becomes a
 * virtio disk the guest writes and reads (/dev/vdb), one plugs in and out while the VM runs, a
 * block volume another running VM holds is refused unless the volume is `security.shared`; host
 * directories and filesystem volumes become 9p shares the guest's init mounts, owners and modes
 * kept both ways, `readonly=true` refusing writes; shares plug in and out of a running VM through
 * the agent. A `tpm` device gets a swtpm per VM. What a VM cannot take is refused with a 400,
 * at create, device add and through a profile.
 */
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startDaemon, startWithPool, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { hasLxc, lxc, lxcOk, lxcRefused } from '../helpers/clients.js';
import { serialUnless } from '../helpers/needs.js';
import { processesWith } from '../helpers/processes.js';
import { importTestVmImage, vmProblem } from '../helpers/vm-image.js';

const serial = serialUnless(vmProblem() ?? (hasLxc() ? undefined : 'the lxc client is not installed'));
const hasSwtpm = spawnSync('sh', ['-c', 'command -v swtpm'], { stdio: 'ignore' }).status === 0;
const tpmTest = serialUnless(vmProblem() ?? (hasLxc() ? undefined : 'the lxc client is not installed') ?? (hasSwtpm ? undefined : 'swtpm is not installed (scripts/install.sh installs it)'));
let d: Daemon;
let work: string;
let dataDir: string;
let pool: string;

test.before(async () => {
  if (vmProblem() || !hasLxc()) return;
  dataDir = mkdtempSync(path.join(tmpdir(), 'corral-vmdk-'));
  // The KVM probe is the lifecycle test's business; here it would only take CPU from the guest.
  d = await startWithPool({ dir: dataDir, plugins: 'full', env: { CORRAL_QEMU_ACCEL: 'tcg' } });
  pool = (await d.request('GET', '/1.0/storage-pools?recursion=1')).json.metadata[0].name;
  work = mkdtempSync(path.join(tmpdir(), 'vm-disks-'));
  await importTestVmImage(d.socket);
});

test.after.always(async () => {
  if (d) for (const name of ['v1', 'v2', 'v3', 'r1']) await lxc(d.socket, 'delete', '--force', name);
  await stopDaemons();
  // Whatever a failed test left of this directory's VMs.
  if (dataDir) for (const p of processesWith(`${dataDir}/qemu/`)) process.kill(p.pid, 'SIGKILL');
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  if (work) rmSync(work, { recursive: true, force: true });
});

const sh = (name: string, script: string) => lxc(d.socket, 'exec', name, '--', 'sh', '-c', script);

serial('devices a VM cannot take are refused with a 400 naming the device: at create, at device add, through a profile', async (t) => {
  await lxcOk(t, d.socket, 'init', 'busybox-vm', 'r1', '--vm', '-c', 'limits.memory=256MiB');
  const refusals: [string, string[], RegExp][] = [
    ['proxy', ['px', 'proxy', 'listen=tcp:127.0.0.1:12345', 'connect=tcp:127.0.0.1:22'], /Invalid device "px": "proxy" devices are not supported on virtual machines/],
    ['unix-char', ['null', 'unix-char', 'path=/dev/null'], /Device "null": .*unix-char"? devices are (not supported on virtual machines|only supported on containers)/],
    ['shift', ['sh', 'disk', `source=${work}`, 'path=/mnt/s', 'shift=true'], /Invalid device "sh": "shift" cannot be used on a virtual machine/],
    ['propagation', ['pr', 'disk', `source=${work}`, 'path=/mnt/p', 'propagation=shared'], /Invalid device "pr": "propagation" cannot be used on a virtual machine/],
    ['path=/', ['slash', 'disk', `source=${work}`, 'path=/'], /Invalid device "slash": .*root disk/],
  ];
  for (const [what, args, message] of refusals) {
    const err = await lxcRefused(t, d.socket, 'config', 'device', 'add', 'r1', ...args);
    t.regex(err, message, what);
  }
  t.deepEqual(Object.keys((await d.request('GET', '/1.0/instances/r1')).json.metadata.devices), [], 'nothing was added');
  const put = await d.request('PUT', '/1.0/instances/r1', { ...(await d.request('GET', '/1.0/instances/r1')).json.metadata, devices: { px: { type: 'proxy', listen: 'tcp:127.0.0.1:12345', connect: 'tcp:127.0.0.1:22' } } });
  t.is(put.status, 400, 'a 400, not a 500');
  t.regex(put.json.error, /Invalid device "px"/);
  // At create, the same, and nothing is made.
  const created = await d.request('POST', '/1.0/instances', {
    name: 'r2', type: 'virtual-machine', source: { type: 'image', alias: 'busybox-vm' },
    devices: { sh: { type: 'disk', source: work, path: '/mnt/s', shift: 'true' } },
  });
  t.is(created.status, 400);
  t.regex(created.json.error, /Invalid device "sh": "shift" cannot be used on a virtual machine/);
  t.is((await d.request('GET', '/1.0/instances/r2')).status, 404, 'nothing was made');
  // A profile holding such a device: applied to a VM, refused; edited under a VM that uses it, refused.
  await lxcOk(t, d.socket, 'profile', 'create', 'chardev');
  await lxcOk(t, d.socket, 'profile', 'device', 'add', 'chardev', 'px', 'proxy', 'listen=tcp:127.0.0.1:12345', 'connect=tcp:127.0.0.1:22');
  t.regex(await lxcRefused(t, d.socket, 'profile', 'add', 'r1', 'chardev'), /Invalid device "px": "proxy" devices are not supported on virtual machines/);
  await lxcOk(t, d.socket, 'profile', 'create', 'later');
  await lxcOk(t, d.socket, 'profile', 'add', 'r1', 'later');
  t.regex(await lxcRefused(t, d.socket, 'profile', 'device', 'add', 'later', 'sh', 'disk', `source=${work}`, 'path=/mnt/s', 'shift=true'), /"shift" cannot be used on a virtual machine/);
  await lxcOk(t, d.socket, 'delete', 'r1');
  await lxcOk(t, d.socket, 'profile', 'delete', 'later');
  await lxcOk(t, d.socket, 'profile', 'delete', 'chardev');
});

serial('a block volume is a virtio disk of the VM, plugged at start and while it runs; host directories and filesystem volumes are 9p shares, at start and plugged in and out through the agent; boot.priority orders disks (vm_boot_priority)', async (t) => {
  t.timeout(420_000);
  // What the VM gets: two block volumes (one plugged later), a filesystem volume, a host directory and a read-only one.
  await lxcOk(t, d.socket, 'storage', 'volume', 'create', pool, 'b1', '--type=block', 'size=64MiB');
  await lxcOk(t, d.socket, 'storage', 'volume', 'create', pool, 'b2', '--type=block', 'size=32MiB');
  await lxcOk(t, d.socket, 'storage', 'volume', 'create', pool, 'fsvol');
  const hostDir = path.join(work, 'host');
  const roDir = path.join(work, 'ro');
  mkdirSync(hostDir);
  mkdirSync(roDir);
  writeFileSync(path.join(hostDir, 'from-host'), 'written on the host\n', { mode: 0o640 });
  chownSync(path.join(hostDir, 'from-host'), 1234, 2345);
  writeFileSync(path.join(roDir, 'kept'), 'read me\n');

  await lxcOk(t, d.socket, 'init', 'busybox-vm', 'v1', '--vm', '-c', 'limits.memory=256MiB', '-c', 'limits.cpu=1');
  // A block volume takes no path; a filesystem one needs one.
  t.regex(await lxcRefused(t, d.socket, 'config', 'device', 'add', 'v1', 'bad', 'disk', `pool=${pool}`, 'source=b1', 'path=/mnt/b'), /cannot have a "path"/);
  t.regex(await lxcRefused(t, d.socket, 'config', 'device', 'add', 'v1', 'bad', 'disk', `pool=${pool}`, 'source=fsvol'), /needs a "path"/);
  await lxcOk(t, d.socket, 'config', 'device', 'add', 'v1', 'b1', 'disk', `pool=${pool}`, 'source=b1', 'boot.priority=10');
  await lxcOk(t, d.socket, 'config', 'device', 'add', 'v1', 'fs', 'disk', `pool=${pool}`, 'source=fsvol', 'path=/mnt/y');
  await lxcOk(t, d.socket, 'config', 'device', 'add', 'v1', 'host', 'disk', `source=${hostDir}`, 'path=/mnt/x');
  await lxcOk(t, d.socket, 'config', 'device', 'add', 'v1', 'ro', 'disk', `source=${roDir}`, 'path=/mnt/ro', 'readonly=true');
  await lxcOk(t, d.socket, 'start', 'v1');
  t.log('v1 started');
  await waitFor(async () => (await lxc(d.socket, 'exec', 'v1', '--', 'true')).status === 0, 120_000, 'the VM agent');

  const conf = readFileSync(path.join(dataDir, 'qemu', 'v1', 'qemu.conf'), 'utf8');
  // vm_boot_priority: the disk with the higher boot.priority comes first in the firmware's order.
  t.regex(conf, /\[device "dev-disk-b1"\][^[]*driver = "virtio-blk-pci"[^[]*bootindex = "1"/, 'b1 (boot.priority=10) first');
  t.regex(conf, /\[device "dev-root"\][^[]*bootindex = "2"/, 'the root disk after it');
  t.true(JSON.parse(await lxcOk(t, d.socket, 'query', '/1.0')).api_extensions.includes('vm_boot_priority'));
  t.regex(conf, /\[fsdev "share-host"\][^[]*security_model = "passthrough"/);
  t.regex(conf, /\[fsdev "share-ro"\][^[]*readonly = "on"/);

  // The block volume: the guest writes it and reads it back; the host sees the bytes in the volume's image.
  t.is((await sh('v1', 'test -b /dev/vdb && cat /sys/block/vdb/size')).stdout.trim(), String((64 * 1024 * 1024) / 512));
  await lxcOk(t, d.socket, 'exec', 'v1', '--', 'sh', '-c', 'printf "block-data-%s" 42 | dd of=/dev/vdb bs=512 conv=sync,fsync 2>/dev/null');
  t.is((await sh('v1', 'echo 3 > /proc/sys/vm/drop_caches; dd if=/dev/vdb bs=13 count=1 2>/dev/null')).stdout, 'block-data-42');
  const image = readFileSync(path.join(dataDir, 'storage-pools', pool, 'custom', 'default_b1', 'root.img')).subarray(0, 13).toString();
  t.is(image, 'block-data-42', 'the volume\'s image holds what the guest wrote');

  // The host directory: the host's file with its owner and mode; the guest's file on the host, owned by root.
  t.is((await sh('v1', 'cat /mnt/x/from-host; stat -c "%u:%g %a" /mnt/x/from-host')).stdout, 'written on the host\n1234:2345 640\n');
  await lxcOk(t, d.socket, 'exec', 'v1', '--', 'sh', '-c', 'echo from the guest > /mnt/x/from-guest && chown 777:888 /mnt/x/from-guest && chmod 604 /mnt/x/from-guest');
  t.is(readFileSync(path.join(hostDir, 'from-guest'), 'utf8'), 'from the guest\n');
  const st = statSync(path.join(hostDir, 'from-guest'));
  t.deepEqual([st.uid, st.gid, st.mode & 0o777], [777, 888, 0o604], 'owner and mode as the guest set them');
  // The filesystem volume, the same way.
  await lxcOk(t, d.socket, 'exec', 'v1', '--', 'sh', '-c', 'echo on the volume > /mnt/y/f && chown 4321:4321 /mnt/y/f');
  const volDir = (await d.request('GET', `/1.0/storage-pools/${pool}/volumes/custom/fsvol`)).json.metadata;
  t.truthy(volDir);
  const volFile = path.join(dataDir, 'storage-pools', pool, 'custom', 'default_fsvol', 'f');
  t.is(readFileSync(volFile, 'utf8'), 'on the volume\n');
  t.is(statSync(volFile).uid, 4321);
  // The read-only share: read, never written.
  t.is((await sh('v1', 'cat /mnt/ro/kept')).stdout, 'read me\n');
  const write = await sh('v1', 'touch /mnt/ro/new');
  t.not(write.status, 0, 'a read-only share refuses writes');
  t.regex(write.stderr, /Read-only file system/);

  // A second block volume plugged into the running VM (blockdev-add, device_add on a spare port) and out again.
  await lxcOk(t, d.socket, 'config', 'device', 'add', 'v1', 'b2', 'disk', `pool=${pool}`, 'source=b2', 'readonly=true');
  await waitFor(async () => (await sh('v1', 'test -b /dev/vdc')).status === 0, 30_000, 'the guest seeing /dev/vdc');
  t.is((await sh('v1', 'cat /sys/block/vdc/ro /sys/block/vdc/size')).stdout, `1\n${(32 * 1024 * 1024) / 512}\n`, 'read-only, 32 MiB');
  await lxcOk(t, d.socket, 'config', 'device', 'remove', 'v1', 'b2');
  t.not((await sh('v1', 'test -b /dev/vdc')).status, 0, 'the disk left the guest');
  // Plugged again writable: the guest writes it.
  await lxcOk(t, d.socket, 'config', 'device', 'add', 'v1', 'b2', 'disk', `pool=${pool}`, 'source=b2');
  await waitFor(async () => (await sh('v1', 'test -b /dev/vdc')).status === 0, 30_000, 'the guest seeing /dev/vdc again');
  await lxcOk(t, d.socket, 'exec', 'v1', '--', 'sh', '-c', 'printf hotplugged | dd of=/dev/vdc bs=512 conv=sync,fsync 2>/dev/null');
  t.is(readFileSync(path.join(dataDir, 'storage-pools', pool, 'custom', 'default_b2', 'root.img')).subarray(0, 10).toString(), 'hotplugged');
  await lxcOk(t, d.socket, 'config', 'device', 'remove', 'v1', 'b2');
  // Shares plug into the running VM too (a spare fsdev, the source bind-mounted under it, the agent mounting it).
  await lxcOk(t, d.socket, 'config', 'device', 'add', 'v1', 'late', 'disk', `source=${roDir}`, 'path=/mnt/late', 'readonly=true');
  await lxcOk(t, d.socket, 'config', 'device', 'add', 'v1', 'late2', 'disk', `source=${hostDir}`, 'path=/mnt/late2');
  t.is((await sh('v1', 'cat /mnt/late/kept')).stdout, 'read me\n');
  t.regex((await sh('v1', 'touch /mnt/late/new')).stderr, /Read-only file system/);
  await lxcOk(t, d.socket, 'exec', 'v1', '--', 'sh', '-c', 'echo hot > /mnt/late2/hot && chown 99:98 /mnt/late2/hot');
  t.is(readFileSync(path.join(hostDir, 'hot'), 'utf8'), 'hot\n');
  t.is(statSync(path.join(hostDir, 'hot')).uid, 99);
  t.is((await sh('v1', 'stat -c %u /mnt/late2/from-host')).stdout, '1234\n');
  // A guest holding the share open keeps it: refused, nothing changed.
  const holder = lxc(d.socket, 'exec', 'v1', '--', 'sh', '-c', 'cd /mnt/late2 && sleep 4');
  await waitFor(async () => (await sh('v1', 'ps | grep -c "[s]leep 4"')).stdout.trim() === '1', 10_000, 'the guest holding the share');
  t.regex(await lxcRefused(t, d.socket, 'config', 'device', 'remove', 'v1', 'late2'), /Device "late2" is in use in the guest/);
  await holder;
  await lxcOk(t, d.socket, 'config', 'device', 'remove', 'v1', 'late');
  await lxcOk(t, d.socket, 'config', 'device', 'remove', 'v1', 'late2');
  t.is((await sh('v1', 'grep -c " /mnt/late" /proc/mounts')).stdout.trim(), '0', 'unmounted in the guest');
  t.false(readFileSync('/proc/self/mountinfo', 'utf8').includes(`${dataDir}/qemu/v1/spares`), 'no host mount left');
  t.true(existsSync(path.join(hostDir, 'from-host')), 'the source is untouched');
  // A share given at start stays until the VM stops (its card sits on the root bus).
  t.regex(await lxcRefused(t, d.socket, 'config', 'device', 'remove', 'v1', 'host'), /cannot be removed from a running virtual machine: stop it first/);

  // A block volume that the running v1 holds is refused to another VM's start, unless shared.
  await lxcOk(t, d.socket, 'init', 'busybox-vm', 'v2', '--vm', '-c', 'limits.memory=256MiB', '-c', 'limits.cpu=1');
  await lxcOk(t, d.socket, 'config', 'device', 'add', 'v2', 'b1', 'disk', `pool=${pool}`, 'source=b1');
  const busy = await lxcRefused(t, d.socket, 'start', 'v2');
  t.regex(busy, /Device "b1": volume "b1" on pool "\S+" is in use by the running virtual machine "v1".*security\.shared=true/);
  t.deepEqual(processesWith(`${dataDir}/qemu/v2/`), [], 'no QEMU left of the refused start');
  // Shared on purpose: both VMs run with it.
  await lxcOk(t, d.socket, 'storage', 'volume', 'set', pool, 'b1', 'security.shared=true');
  await lxcOk(t, d.socket, 'start', 'v2');
  t.regex(await lxcOk(t, d.socket, 'list', 'v2', '-c', 's', '--format', 'csv'), /RUNNING/);
  // Plugged into a running VM, the same: a volume v1 holds is refused to the running v2, and v2 keeps its devices.
  await lxcOk(t, d.socket, 'storage', 'volume', 'create', pool, 'b4', '--type=block', 'size=8MiB');
  await lxcOk(t, d.socket, 'config', 'device', 'add', 'v1', 'b4', 'disk', `pool=${pool}`, 'source=b4');
  t.regex(await lxcRefused(t, d.socket, 'config', 'device', 'add', 'v2', 'b4', 'disk', `pool=${pool}`, 'source=b4'), /Device "b4": volume "b4" .* in use by the running virtual machine "v1"/);
  t.is((await d.request('GET', '/1.0/instances/v2')).json.metadata.devices.b4, undefined);
  await lxcOk(t, d.socket, 'config', 'device', 'remove', 'v1', 'b4');
  await lxcOk(t, d.socket, 'stop', '--force', 'v2');
  // A disk given at start leaves the running VM too (it sits on a root port of its own).
  await lxcOk(t, d.socket, 'config', 'device', 'remove', 'v1', 'b1');
  t.not((await sh('v1', 'test -b /dev/vdb')).status, 0, 'b1 left the guest');
  await lxcOk(t, d.socket, 'stop', '--force', 'v1');
  await lxcOk(t, d.socket, 'delete', 'v2');
});

tpmTest('a tpm device: the guest sees a TPM 2.0 (/dev/tpm0) served by a swtpm whose state stays in the VM\'s volume; a restarted daemon adopts it and a hot-plugged disk; it ends with the VM (tpm_device_type)', async (t) => {
  t.timeout(300_000);
  t.true(JSON.parse(await lxcOk(t, d.socket, 'query', '/1.0')).api_extensions.includes('tpm_device_type'), 'the extension is announced');
  await lxcOk(t, d.socket, 'init', 'busybox-vm', 'v3', '--vm', '-c', 'limits.memory=256MiB', '-c', 'limits.cpu=1');
  await lxcOk(t, d.socket, 'config', 'device', 'add', 'v3', 'tpm0', 'tpm');
  t.regex(await lxcRefused(t, d.socket, 'config', 'device', 'add', 'v3', 'tpm1', 'tpm'), /Only one TPM device is allowed/);
  t.regex(await lxcRefused(t, d.socket, 'config', 'device', 'add', 'v3', 'tpm1', 'tpm', 'bogus=1'), /unknown option "bogus"/);
  await lxcOk(t, d.socket, 'start', 'v3');
  await waitFor(async () => (await lxc(d.socket, 'exec', 'v3', '--', 'true')).status === 0, 120_000, 'the VM agent');
  t.is((await sh('v3', 'test -c /dev/tpm0 && cat /sys/class/tpm/tpm0/tpm_version_major')).stdout, '2\n');
  const swtpm = processesWith(`${dataDir}/qemu/v3/tpm.sock`);
  t.is(swtpm.length, 1, 'one swtpm for the VM');
  const state = path.join(dataDir, 'storage-pools', pool, 'virtual-machines', 'v3', 'tpm', 'tpm2-00.permall');
  t.true(existsSync(state), 'the TPM state is in the VM\'s volume');
  const before = statSync(state).ino;
  // A disk plugged in, then the daemon killed: the new one adopts the VM, its swtpm and its disk.
  await lxcOk(t, d.socket, 'storage', 'volume', 'create', pool, 'b3', '--type=block', 'size=16MiB');
  await lxcOk(t, d.socket, 'config', 'device', 'add', 'v3', 'b3', 'disk', `pool=${pool}`, 'source=b3');
  await waitFor(async () => (await sh('v3', 'test -b /dev/vdb')).status === 0, 30_000, 'the guest seeing /dev/vdb');
  d.child.kill('SIGKILL');
  await new Promise((r) => d.child.once('exit', r));
  d = await startDaemon({ dir: dataDir, plugins: 'full', env: { CORRAL_QEMU_ACCEL: 'tcg' } });
  await waitFor(async () => (await lxc(d.socket, 'exec', 'v3', '--', 'true')).status === 0, 30_000, 'the agent after the restart');
  t.deepEqual(processesWith(`${dataDir}/qemu/v3/tpm.sock`).map((p) => p.pid), swtpm.map((p) => p.pid), 'the same swtpm serves the VM');
  t.is((await sh('v3', 'cat /sys/class/tpm/tpm0/tpm_version_major')).stdout, '2\n');
  await lxcOk(t, d.socket, 'config', 'device', 'remove', 'v3', 'b3');
  t.not((await sh('v3', 'test -b /dev/vdb')).status, 0, 'the adopted VM\'s disk unplugged');
  await lxcOk(t, d.socket, 'stop', 'v3', '--force');
  await waitFor(() => processesWith(`${dataDir}/qemu/v3/tpm.sock`).length === 0, 5_000, 'swtpm ending with the VM');
  t.is(statSync(state).ino, before, 'the state stays for the next start');
  // Removed while stopped: the next start has no TPM.
  await lxcOk(t, d.socket, 'config', 'device', 'remove', 'v3', 'tpm0');
  await lxcOk(t, d.socket, 'delete', 'v3');
});
