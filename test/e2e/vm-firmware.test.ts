/**
 * The firmware boot path through the real `lxc` client: a VM image whose disk holds no kernel
 * (here a blank disk) boots through OVMF with secure boot by default (which refuses to run the
 * unsigned EFI shell), through OVMF without it under security.secureboot=false, and through
 * SeaBIOS under security.csm=true; each shows on the serial console log. raw.qemu.conf edits the
 * generated config, and a malformed one is a 400.
 */
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startWithPool, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { lxc } from '../helpers/clients.js';
import { vmProblem } from '../helpers/vm-image.js';

const skip = vmProblem();
const vmTest = skip ? test.serial.skip : test.serial;
if (skip) console.warn(`Skipping virtual machine firmware: ${skip}`);

let d: Daemon;
const work = mkdtempSync(path.join(tmpdir(), 'corral-vmfw-'));

test.before(async () => {
  if (skip) return;
  d = await startWithPool({ plugins: 'full', env: { CORRAL_QEMU_ACCEL: 'tcg' } });
  writeFileSync(path.join(work, 'metadata.yaml'), 'architecture: x86_64\ncreation_date: 1700000000\nproperties:\n  description: blank disk\n');
  spawnSync('tar', ['-C', work, '-czf', path.join(work, 'meta.tar.gz'), 'metadata.yaml']);
  const made = spawnSync('qemu-img', ['create', '-q', '-f', 'qcow2', path.join(work, 'rootfs.img'), '32M']);
  if (made.status !== 0) throw new Error(`qemu-img create failed: ${made.stderr}`);
  const imported = await lxc(d.socket, 'image', 'import', path.join(work, 'meta.tar.gz'), path.join(work, 'rootfs.img'), '--alias', 'blank');
  if (imported.status !== 0) throw new Error(`image import failed: ${imported.stderr}`);
});

test.after.always(async () => {
  if (skip) return;
  await lxc(d.socket, 'delete', '--force', 'f1');
  await lxc(d.socket, 'delete', '--force', 'e1');
  await stopDaemons();
  rmSync(work, { recursive: true, force: true });
});

const consoleLog = async () => (await lxc(d.socket, 'console', 'f1', '--show-log')).stdout;

async function bootAndSee(config: string[], expected: RegExp, what: string): Promise<string> {
  await lxc(d.socket, 'delete', '--force', 'f1');
  const launch = await lxc(d.socket, 'launch', 'blank', 'f1', '--vm', '-c', 'limits.memory=256MiB', ...config);
  if (launch.status !== 0) throw new Error(`launch failed: ${launch.stderr}`);
  await waitFor(async () => expected.test(await consoleLog()), 90_000, what);
  const log = (await lxc(d.socket, 'info', 'f1', '--show-log')).stdout;
  await lxc(d.socket, 'stop', '--force', 'f1');
  return log;
}

vmTest('a disk without a kernel boots through OVMF with secure boot (the unsigned shell is refused)', async (t) => {
  const log = await bootAndSee([], /Security Violation/, 'secure boot refusing the EFI shell');
  t.regex(log, /firmware boot \(OVMF, secure boot\)/);
  t.truthy(readFileSync(path.join(d.dir, 'storage-pools', 'default', 'virtual-machines', 'f1', 'qemu.nvram')).length, 'the VM has its own UEFI variables');
});

vmTest('an image whose requirements.secureboot is false does not start under secure boot (a 400 saying what to set) and starts without it', async (t) => {
  const dir = mkdtempSync(path.join(work, 'unsigned-'));
  writeFileSync(path.join(dir, 'metadata.yaml'), 'architecture: x86_64\ncreation_date: 1700000000\nproperties:\n  description: unsigned loader\n  requirements.secureboot: "false"\n');
  spawnSync('tar', ['-C', dir, '-czf', path.join(dir, 'meta.tar.gz'), 'metadata.yaml']);
  t.is((await lxc(d.socket, 'image', 'import', path.join(dir, 'meta.tar.gz'), path.join(work, 'rootfs.img'), '--alias', 'unsigned')).status, 0);
  t.is((await lxc(d.socket, 'init', 'unsigned', 'u1', '--vm', '-c', 'limits.memory=256MiB')).status, 0);
  const refused = await lxc(d.socket, 'start', 'u1');
  t.is(refused.status, 1);
  t.regex(refused.stderr, /requirements\.secureboot is false\): set security\.secureboot=false/);
  t.is((await lxc(d.socket, 'list', 'u1', '--format', 'csv', '-c', 's')).stdout.trim(), 'STOPPED');
  t.is((await lxc(d.socket, 'config', 'set', 'u1', 'security.secureboot', 'false')).status, 0);
  const started = await lxc(d.socket, 'start', 'u1');
  t.is(started.status, 0, started.stderr);
  t.is((await lxc(d.socket, 'delete', '--force', 'u1')).status, 0);
  t.is((await lxc(d.socket, 'image', 'delete', 'unsigned')).status, 0);
});

vmTest('security.secureboot=false boots OVMF without secure boot, which runs the EFI shell', async (t) => {
  const log = await bootAndSee(['-c', 'security.secureboot=false'], /Shell>|UEFI Interactive Shell/, 'the EFI shell');
  t.regex(log, /firmware boot \(OVMF\)/);
});

vmTest('security.csm=true boots SeaBIOS', async (t) => {
  const log = await bootAndSee(['-c', 'security.csm=true', '-c', 'security.secureboot=false'], /Booting from Hard Disk/, 'SeaBIOS trying the disk');
  t.regex(log, /firmware boot \(SeaBIOS\)/);
  t.regex(await consoleLog(), /SeaBIOS/);
});

vmTest('raw.qemu.conf overrides a generated section; a malformed one, or an accelerator QEMU lacks, is refused with a 400', async (t) => {
  await lxc(d.socket, 'delete', '--force', 'f1');
  t.is((await lxc(d.socket, 'init', 'blank', 'f1', '--vm', '-c', 'security.csm=true', '-c', 'security.secureboot=false')).status, 0);
  t.is((await d.request('PATCH', '/1.0/instances/f1', { config: { 'raw.qemu.conf': '[memory]\nsize = "200M"\n' } })).status, 200);
  t.is((await lxc(d.socket, 'start', 'f1')).status, 0);
  const conf = readFileSync(path.join(d.dir, 'qemu', 'f1', 'qemu.conf'), 'utf8');
  t.regex(conf, /\[memory\]\n {2}size = "200M"/);
  t.is((await lxc(d.socket, 'stop', '--force', 'f1')).status, 0);
  const bad = await d.request('PATCH', '/1.0/instances/f1', { config: { 'raw.qemu.conf': 'size = "200M"\n' } });
  t.is(bad.status, 400);
  t.regex(bad.json.error, /raw\.qemu\.conf.*before any \[section\]/);
  // An accelerator this QEMU does not have: QEMU's refusal at start is the user's 400, and nothing runs.
  t.is((await d.request('PATCH', '/1.0/instances/f1', { config: { 'raw.qemu.conf': '[machine]\naccel = "xen"\n' } })).status, 200);
  const noAccel = await lxc(d.socket, 'start', 'f1');
  t.not(noAccel.status, 0);
  t.regex(noAccel.stderr, /invalid accelerator xen/);
  t.regex(noAccel.stderr, /check raw\.qemu/);
  t.regex(readFileSync(path.join(d.dir, 'logs', 'f1', 'qemu.log'), 'utf8'), /QEMU failed to start: .*invalid accelerator xen/);
  t.is((await d.request('GET', '/1.0/instances/f1/state')).json.metadata.status, 'Stopped');
  const csm = await d.request('PATCH', '/1.0/instances/f1', { config: { 'security.csm': 'true', 'security.secureboot': 'true' } });
  t.is(csm.status, 400, 'legacy BIOS has no secure boot');
});

vmTest('an empty VM (lxc init --empty --vm) gets a blank sparse disk of the root size and boots into its firmware', async (t) => {
  t.is((await lxc(d.socket, 'init', '--empty', 'e1', '--vm', '-c', 'limits.memory=256MiB', '-c', 'security.csm=true', '-c', 'security.secureboot=false', '--device', 'root,size=2GiB')).status, 0);
  const disk = path.join(d.dir, 'storage-pools', 'default', 'virtual-machines', 'e1', 'root.img');
  const st = statSync(disk);
  t.is(st.size, 2 * 1024 ** 3);
  t.true(st.blocks * 512 < 1024 * 1024, 'sparse');
  t.is((await lxc(d.socket, 'start', 'e1')).status, 0);
  await waitFor(async () => /Booting from Hard Disk/.test((await lxc(d.socket, 'console', 'e1', '--show-log')).stdout), 60_000, 'SeaBIOS trying the blank disk');
  t.is((await lxc(d.socket, 'stop', '--force', 'e1')).status, 0);
  t.is((await lxc(d.socket, 'delete', 'e1')).status, 0);
});
