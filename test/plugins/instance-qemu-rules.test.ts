/**
 * The QEMU driver's rules that need no VM: raw.qemu.conf edits of the generated config, the
 * splitting of raw.qemu and QEMU's own verdict on it, boot order from boot.priority, vCPU and
 * memory values, the run directory's socket path limit, and the direct-kernel detection of an
 * ext4 disk holding a kernel (read with debugfs, as the driver does), the netdev of bridged and
 * macvlan NICs, the VGA console's sections.
 */
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { applyOverrides, parseOverrides, renderSections, section } from '../../plugins/instance-qemu/qemu-config.js';
import { checkRawQemu, splitArgs } from '../../plugins/instance-qemu/raw-qemu.js';
import { bootIndexes } from '../../plugins/instance-qemu/vm-sections.js';
import { memoryMiB, vcpus } from '../../plugins/instance-qemu/limits.js';
import { RunDir } from '../../plugins/instance-qemu/run-dir.js';
import { extractBootFiles, isExtFilesystem } from '../../plugins/instance-qemu/boot-files.js';
import { refusedDevice } from '../../plugins/instance-qemu/vm-devices.js';
import { tapFor, tapNetdev } from '../../plugins/instance-qemu/taps.js';
import { vgaSections } from '../../plugins/instance-qemu/vga.js';
import type { HostTools } from '../../sdk/index.js';
import { claimsNamed } from '../helpers/claims.js';

/** The host tools the daemon uses, as plain child processes. */
const tools: HostTools = {
  async run(command, args, opts = {}) {
    const r = spawnSync(command, args, { encoding: 'utf8', timeout: opts.timeoutMs, input: opts.input });
    if (r.status !== 0 && !opts.allowFailure) throw new Error(`${command} failed: ${r.stderr}`);
    return { stdout: r.stdout ?? '', stderr: r.stderr ?? '', exitCode: r.status ?? -1 };
  },
  spawn() {
    throw new Error('not used');
  },
  async which() {
    return undefined;
  },
};

const hasQemu = spawnSync('qemu-system-x86_64', ['--version']).status === 0;

test('raw.qemu.conf replaces, adds and removes options and sections of the generated config', (t) => {
  const generated = [
    section('memory', undefined, { size: '256M' }),
    section('device', 'dev-root', { driver: 'virtio-blk-pci', drive: 'root', bootindex: '1' }),
    section('device', 'serial0', { driver: 'isa-serial' }),
  ];
  const edits = parseOverrides('# a comment\n[memory]\nsize = "512M"\n[device "dev-root"]\nbootindex =\nnum-queues = 2\n[device "serial0"]\n[device "qemu_rng"]\ndriver = "virtio-rng-pci"\n');
  const out = applyOverrides(generated, edits);
  t.deepEqual(out.map((s) => s.name), ['memory', 'device "dev-root"', 'device "qemu_rng"']);
  t.deepEqual(out[0]!.entries, { size: '512M' });
  t.deepEqual(out[1]!.entries, { driver: 'virtio-blk-pci', drive: 'root', 'num-queues': '2' });
  t.is(renderSections(out).split('\n').filter((l) => l.startsWith('[')).length, 3);
  t.regex(renderSections(out), /\[device "qemu_rng"\]\n {2}driver = "virtio-rng-pci"/);
  t.throws(() => parseOverrides('size = 1\n'), { message: /before any \[section\]/ });
  t.throws(() => parseOverrides('[memory]\nnot an option\n'), { message: /expected "key = value"/ });
  t.throws(() => parseOverrides('[memory]\nsize = "a"b"\n'), { message: /double quote/ });
});

test('raw.qemu splits like a shell and QEMU itself judges the options', async (t) => {
  t.deepEqual(splitArgs(`-machine acpi=off -append "root=/dev/vda quiet" -name 'x y'`), ['-machine', 'acpi=off', '-append', 'root=/dev/vda quiet', '-name', 'x y']);
  t.throws(() => splitArgs('-name "open'), { message: /unterminated/ });
  await t.throwsAsync(checkRawQemu(tools, '-qmp unix:/tmp/x'), { message: /managed by the daemon/ });
  if (!hasQemu) return t.log('skipped the QEMU verdicts: qemu-system-x86_64 is not installed');
  t.deepEqual(await checkRawQemu(tools, '-machine acpi=off'), ['-machine', 'acpi=off']);
  await t.throwsAsync(checkRawQemu(tools, '-no-such-option'), { message: /QEMU refuses it: -no-such-option: invalid option/ });
  // `-h` becomes the value of a last option that takes one: QEMU refuses that value.
  await t.throwsAsync(checkRawQemu(tools, '-m'), { message: /QEMU refuses it: -m -h/ });
});

test('boot.priority orders the boot indexes, highest first, ties in device order, from 1', (t) => {
  t.deepEqual([...bootIndexes([{ id: 'root', priority: 0 }, { id: 'nic-eth0', priority: 0 }])], [['root', 1], ['nic-eth0', 2]]);
  t.deepEqual([...bootIndexes([{ id: 'root', priority: 0 }, { id: 'nic-eth0', priority: 10 }])], [['nic-eth0', 1], ['root', 2]]);
});

test('vCPUs and memory as a VM takes them', (t) => {
  t.is(vcpus(undefined), 1);
  t.is(vcpus('2'), 2);
  t.is(vcpus('0-1,4'), 3);
  t.throws(() => vcpus('0'), { message: /1 to 288/ });
  t.throws(() => vcpus('a-b'), { message: /Invalid CPU set/ });
  t.is(vcpus('0-3,2-5,1'), 6, 'each host CPU once');
  t.throws(() => vcpus('0-300'), { message: /1 to 288 vCPUs, the CPU set "0-300" names 301/ });
  t.throws(() => vcpus('0-4000000000'), { message: /out of range/ });
  t.is(memoryMiB(undefined), 1024);
  t.is(memoryMiB('256MiB'), 256);
  t.is(memoryMiB('1GB'), 953);
  t.throws(() => memoryMiB('1MiB'), { message: /at least 32MiB/ });
});

test('a run directory whose sockets would pass the unix path limit is named by a hash', (t) => {
  const short = new RunDir('/tmp/d/qemu', 'v1');
  t.is(short.dir, '/tmp/d/qemu/v1');
  const long = new RunDir(`/tmp/${'x'.repeat(40)}/qemu`, `project_${'n'.repeat(63)}`);
  t.regex(path.basename(long.dir), /^~[0-9a-f]{16}$/);
  t.true(long.consoleSocket.length <= 107);
  t.is(new RunDir(`/tmp/${'x'.repeat(40)}/qemu`, `project_${'n'.repeat(63)}`).dir, long.dir, 'the same every time');
});

test('devices a VM cannot take are named', (t) => {
  t.is(refusedDevice({ type: 'disk', path: '/', pool: 'default' }), undefined);
  t.is(refusedDevice({ type: 'nic', network: 'br0' }), undefined);
  t.is(refusedDevice({ type: 'disk', path: '/mnt', source: '/srv' }), undefined, 'a host directory: a 9p share');
  t.is(refusedDevice({ type: 'disk', pool: 'default', source: 'b1' }), undefined, 'a block volume: a virtio disk');
  t.is(refusedDevice({ type: 'tpm' }), undefined);
  t.regex(refusedDevice({ type: 'disk', path: '/mnt', source: '/srv', shift: 'true' })!, /"shift" cannot be used on a virtual machine/);
  t.regex(refusedDevice({ type: 'disk', path: '/mnt', source: '/srv', propagation: 'shared' })!, /"propagation" cannot be used on a virtual machine/);
  t.regex(refusedDevice({ type: 'disk', path: '/', source: '/srv' })!, /root disk/);
  t.regex(refusedDevice({ type: 'unix-char', path: '/dev/null' })!, /"unix-char" devices are not supported/);
  for (const type of ['usb', 'gpu', 'pci', 'infiniband']) t.is(refusedDevice({ type }), undefined, `${type}: its own type checks it for VMs`);
  t.is(refusedDevice({ type: 'nic', nictype: 'bridged', parent: 'br0' }), undefined);
  t.is(refusedDevice({ type: 'nic', nictype: 'macvlan', parent: 'eth0' }), undefined);
  t.regex(refusedDevice({ type: 'nic', nictype: 'physical', parent: 'eth0' })!, /nictype "physical" is not supported on virtual machines yet/);
});

test('a bridged NIC becomes a tap QEMU opens by name; a macvlan NIC a macvtap whose device QEMU gets from the helper', (t) => {
  const tap = tapFor('eth0', { name: 'eth0', kind: 'veth', hostName: 'tap1234', link: 'br0', hwaddr: '00:16:3e:00:00:01' });
  t.deepEqual(tapNetdev(tap), { type: 'tap', ifname: 'tap1234', script: 'no', downscript: 'no' });
  const mvt = tapFor('eth1', { name: 'eth1', kind: 'macvlan', link: 'br0', hwaddr: '00:16:3e:00:00:02', macvlanMode: 'bridge' });
  t.regex(mvt.name, /^mvt[0-9a-f]{8}$/);
  t.deepEqual(mvt.macvtap, { parent: 'br0', mode: 'bridge' });
  mvt.helper = 'python3 /run/tap-fd.py /dev/tap9';
  t.deepEqual(tapNetdev(mvt), { type: 'tap', helper: 'python3 /run/tap-fd.py /dev/tap9' });
  t.throws(() => tapFor('eth2', { name: 'eth2', kind: 'macvlan', link: 'br0', macvlanMode: 'sideways' }), { message: /invalid macvlan mode "sideways"/ });
  t.throws(() => tapFor('eth3', { name: 'eth3', kind: 'phys', link: 'eth9' }), { message: /phys NICs are not supported on virtual machines yet/ });
});

test('every VM gets a display card and a SPICE server on a unix socket of its run directory, without a password', (t) => {
  const text = renderSections(vgaSections('/var/lib/corral/qemu/v1/spice.sock'));
  t.regex(text, /\[spice\]\n\s*unix = "on"\n\s*addr = "\/var\/lib\/corral\/qemu\/v1\/spice.sock"\n\s*disable-ticketing = "on"/);
  t.regex(text, /\[device "vga"\]\n\s*driver = "virtio-vga"/);
});

const hasE2fsprogs = spawnSync('sh', ['-c', 'command -v mkfs.ext4 && command -v debugfs']).status === 0;
if (!hasE2fsprogs) console.warn('Skipping the direct-kernel test: e2fsprogs is not installed');

(hasE2fsprogs ? test : test.skip)('the direct-kernel path finds /boot/vmlinux (through a symlink too) and the initrd in an ext4 disk, and keeps its copies while they are the same', async (t) => {
  const work = mkdtempSync(path.join(tmpdir(), 'corral-bootfiles-'));
  try {
    const tree = path.join(work, 'tree');
    mkdirSync(path.join(tree, 'boot'), { recursive: true });
    writeFileSync(path.join(tree, 'boot/vmlinux-6.1'), 'kernel bytes');
    spawnSync('ln', ['-s', 'vmlinux-6.1', path.join(tree, 'boot/vmlinux')]);
    writeFileSync(path.join(tree, 'boot/initrd.img'), 'initrd bytes');
    const disk = path.join(work, 'root.img');
    t.is(spawnSync('mkfs.ext4', ['-q', '-d', tree, disk, '8M']).status, 0);
    t.true(await isExtFilesystem(disk));
    const found = await extractBootFiles(tools, disk, path.join(work, 'kernel'), path.join(work, 'initrd'));
    t.truthy(found);
    t.is(readFileSync(found!.kernel, 'utf8'), 'kernel bytes');
    t.is(readFileSync(found!.initrd!, 'utf8'), 'initrd bytes');
    // Kept while the disk's boot files stay the same; read out again once they change.
    const sig = path.join(work, 'boot.sig');
    const first = await extractBootFiles(tools, disk, path.join(work, 'k1'), path.join(work, 'i1'), sig);
    const copied = statSync(first!.kernel).mtimeMs;
    await new Promise((r) => setTimeout(r, 20));
    const again = await extractBootFiles(tools, disk, path.join(work, 'k1'), path.join(work, 'i1'), sig);
    t.is(statSync(again!.kernel).mtimeMs, copied, 'not copied again');
    writeFileSync(path.join(tree, 'boot/vmlinux-6.1'), 'new kernel');
    rmSync(disk);
    t.is(spawnSync('mkfs.ext4', ['-q', '-d', tree, disk, '8M']).status, 0);
    const changed = await extractBootFiles(tools, disk, path.join(work, 'k1'), path.join(work, 'i1'), sig);
    t.is(readFileSync(changed!.kernel, 'utf8'), 'new kernel');
    const blank = path.join(work, 'blank.img');
    writeFileSync(blank, Buffer.alloc(1 << 20));
    t.false(await isExtFilesystem(blank));
    t.is(await extractBootFiles(tools, blank, path.join(work, 'k2'), path.join(work, 'i2')), undefined, 'no file system: firmware boot');
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});

test('every api extension instance-qemu claims is named by a test title', (t) => {
  const { claims, unnamed } = claimsNamed('instance-qemu');
  t.true(claims.includes('tpm_device_type'));
  t.deepEqual(unnamed, []);
});
