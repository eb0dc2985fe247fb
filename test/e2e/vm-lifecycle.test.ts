/**
 * Virtual machines through the real `lxc` client on real QEMU (TCG here): launch from the test VM
 * image, state, console log, pause and resume, graceful and forced stops, a daemon restart with
 * the VM running (adopted), a `kill -9` of the daemon in the middle of a start, and bad input.
 * One VM at a time, 1 vCPU and 256MiB: a TCG guest is CPU-hungry.
 */
import test from 'ava';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { startDaemon, startWithPool, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { lxc, lxcEnv } from '../helpers/clients.js';
import { createRequire } from 'node:module';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { importTestVmImage, qemuOf, vmProblem } from '../helpers/vm-image.js';

const require = createRequire(import.meta.url);
const skip = vmProblem();
const vmTest = skip ? test.serial.skip : test.serial;
if (skip) console.warn(`Skipping virtual machine lifecycle: ${skip}`);

let d: Daemon;
let dir: string;
let container: BusyboxImage | undefined;
const SMALL = ['-c', 'limits.memory=256MiB', '-c', 'limits.cpu=1'];


/** v1 exists (tests run alone with --match too). */
async function ensureV1(): Promise<void> {
  if ((await d.request('GET', '/1.0/instances/v1')).status === 404 && (await lxc(d.socket, 'init', 'vm', 'v1', '--vm', ...SMALL)).status !== 0) throw new Error('lxc init v1 failed');
}

const state = async (name: string) => (await lxc(d.socket, 'list', name, '-c', 'ns', '--format', 'csv')).stdout.trim();

async function restartDaemon(): Promise<void> {
  d = await startDaemon({ dir, plugins: 'full' });
}

test.before(async () => {
  if (skip) return;
  dir = mkdtempSync(path.join(tmpdir(), 'corral-vm-'));
  d = await startWithPool({ dir, plugins: 'full' });
  await importTestVmImage(d.socket, 'vm');
});

test.after.always(async () => {
  if (skip) return;
  if (d) for (const name of ['v1', 'v2', 'v3', 'v4', 'c1']) await lxc(d.socket, 'delete', '--force', name);
  await stopDaemons();
  for (const pid of qemuOf(dir)) process.kill(pid, 'SIGKILL');
  rmSync(dir, { recursive: true, force: true });
  if (container) rmSync(container.dir, { recursive: true, force: true });
});

vmTest('lxc launch --vm boots the image: RUNNING, the kernel in the console log, the accelerator in lxc info --show-log', async (t) => {
  const env = (await d.request('GET', '/1.0')).json.metadata.environment;
  t.regex(env.driver, /\bqemu\b/, 'GET /1.0 lists the qemu driver');
  const started = Date.now();
  const launch = await lxc(d.socket, 'launch', 'vm', 'v1', '--vm', ...SMALL);
  t.is(launch.status, 0, launch.stderr);
  t.log(`launch to RUNNING: ${Date.now() - started} ms`);
  t.is(await state('v1'), 'v1,RUNNING');
  t.is(qemuOf(dir).length, 1);
  await waitFor(async () => /Linux version/.test((await lxc(d.socket, 'console', 'v1', '--show-log')).stdout), 60_000, 'the kernel banner in the console log');
  const info = await lxc(d.socket, 'info', 'v1', '--show-log');
  t.regex(info.stdout, /Type: virtual-machine/);
  t.regex(info.stdout, /accelerator (tcg|kvm)/);
  t.regex(info.stdout, /Processes: -?\d+/);
  // What the sparse 10GiB disk takes, not its size.
  const usage = /Disk usage:\s+root: ([\d.]+)(\w+)/.exec(info.stdout);
  t.truthy(usage, info.stdout);
  t.true(usage![2] !== 'GiB', `root disk usage ${usage![1]}${usage![2]}`);
  // Typed collections: a VM is under /1.0/virtual-machines, not /1.0/containers.
  t.deepEqual((await d.request('GET', '/1.0/virtual-machines')).json.metadata, ['/1.0/virtual-machines/v1']);
  t.is((await d.request('GET', '/1.0/containers/v1')).status, 404);
  // GET /1.0/metrics covers VMs: QEMU's CPU time and memory beside the guest's RAM.
  const metrics = String((await d.request('GET', '/1.0/metrics')).body);
  t.regex(metrics, /lxd_memory_RSS_bytes\{[^}]*name="v1"[^}]*type="virtual-machine"[^}]*\} [1-9]/);
  t.regex(metrics, /lxd_memory_MemTotal_bytes\{[^}]*name="v1"[^}]*\} 2\.68435456e\+08/);
  t.regex(metrics, /lxd_cpu_seconds_total\{[^}]*name="v1"[^}]*\} \d/);
  const rec = (await d.request('GET', '/1.0/instances/v1')).json.metadata;
  t.is(rec.type, 'virtual-machine');
  t.truthy(rec.config['volatile.uuid']);
});

vmTest('lxc pause freezes the VM (QMP stop) and lxc start resumes it', async (t) => {
  t.is((await lxc(d.socket, 'pause', 'v1')).status, 0);
  t.is(await state('v1'), 'v1,FROZEN');
  t.is((await d.request('GET', '/1.0/instances/v1/state')).json.metadata.status, 'Frozen');
  t.is((await lxc(d.socket, 'start', 'v1')).status, 0);
  t.is(await state('v1'), 'v1,RUNNING');
});

vmTest('a daemon restart adopts the running VM, which then stops', async (t) => {
  const [pid] = qemuOf(dir);
  await d.stop();
  t.deepEqual(qemuOf(dir), [pid], 'QEMU outlives the daemon');
  await restartDaemon();
  t.is(await state('v1'), 'v1,RUNNING');
  t.is((await d.request('GET', '/1.0/instances/v1/state')).json.metadata.pid, pid);
  t.is((await lxc(d.socket, 'pause', 'v1')).status, 0, 'QMP reaches the adopted VM');
  t.is(await state('v1'), 'v1,FROZEN');
  const stop = await lxc(d.socket, 'stop', 'v1', '--force');
  t.is(stop.status, 0, stop.stderr);
  t.is(await state('v1'), 'v1,STOPPED');
  t.deepEqual(qemuOf(dir), []);
});

vmTest('lxc console attaches to the serial console; a graceful stop powers the guest off through ACPI; lxc restart boots it again', async (t) => {
  await ensureV1();
  const started = Date.now();
  if (await state('v1') !== 'v1,RUNNING') t.is((await lxc(d.socket, 'start', 'v1')).status, 0);
  const pty = require('node-pty');
  const term = pty.spawn('lxc', ['console', 'v1'], { cols: 100, rows: 30, env: lxcEnv(d.socket) });
  let out = '';
  term.onData((s: string) => (out += s));
  const exited = new Promise<number>((r) => term.onExit((e: { exitCode: number }) => r(e.exitCode)));
  await waitFor(() => out.includes('+a q'), 10_000, 'the client banner');
  await waitFor(async () => {
    term.write('echo marker-$((6*7))\r');
    await new Promise((r) => setTimeout(r, 300));
    return out.includes('marker-42');
  }, 60_000, 'the guest shell on the console');
  t.log(`start to a shell on the console: ${Date.now() - started} ms`);
  term.write('\x01');
  await new Promise((r) => setTimeout(r, 300));
  term.write('q');
  t.is(await exited, 0, 'ctrl+a q detaches');
  t.regex((await lxc(d.socket, 'console', 'v1', '--show-log')).stdout, /marker-42/);

  const [before] = qemuOf(dir);
  const logged = (await lxc(d.socket, 'console', 'v1', '--show-log')).stdout.length;
  const restart = await lxc(d.socket, 'restart', 'v1');
  t.is(restart.status, 0, restart.stderr);
  t.is(await state('v1'), 'v1,RUNNING');
  t.notDeepEqual(qemuOf(dir), [before], 'a new QEMU');
  // By now the KVM probe (booting the first VM's kernel under KVM with a deadline) has answered:
  // the restart's start names its verdict, which is kept for the next boots.
  await waitFor(() => existsSync(path.join(dir, 'qemu', 'accelerator.json')), 30_000, 'the KVM probe verdict');
  const verdict = JSON.parse(readFileSync(path.join(dir, 'qemu', 'accelerator.json'), 'utf8'));
  t.log(`KVM probe: ${verdict.accelerator} (${verdict.reason})`);
  t.regex(verdict.reason, /probe boot took|did not boot under KVM|QEMU refused KVM|\/dev\/kvm is not available/);
  // The power button watcher starts with the guest's init scripts: wait for its shell.
  await waitFor(async () => /[/~] # /.test((await lxc(d.socket, 'console', 'v1', '--show-log')).stdout.slice(logged)), 60_000, 'the guest to come up again');
  await new Promise((r) => setTimeout(r, 500));
  const stopping = Date.now();
  const stop = await lxc(d.socket, 'stop', 'v1', '--timeout', '30');
  t.is(stop.status, 0, stop.stderr);
  const took = Date.now() - stopping;
  t.log(`graceful stop (ACPI power button): ${took} ms`);
  t.true(took < 15_000, `the guest powered itself off (took ${took} ms)`);
  t.is(await state('v1'), 'v1,STOPPED');
  t.deepEqual(qemuOf(dir), []);
});

vmTest('a guest that ignores the ACPI power button is killed within its timeout + 1 s', async (t) => {
  // Without ACPI the guest never sees the power button.
  const set = await lxc(d.socket, 'config', 'set', 'v1', 'raw.qemu=-machine acpi=off');
  t.is(set.status, 0, set.stderr);
  t.is((await lxc(d.socket, 'start', 'v1')).status, 0);
  const started = Date.now();
  const stop = await lxc(d.socket, 'stop', 'v1', '--timeout', '2');
  const took = Date.now() - started;
  t.is(stop.status, 0, stop.stderr);
  t.log(`stop of an ACPI-ignoring guest, timeout 2 s: ${took} ms`);
  t.true(took < 3000, `took ${took} ms`);
  t.is(await state('v1'), 'v1,STOPPED');
  t.deepEqual(qemuOf(dir), []);
  t.is((await lxc(d.socket, 'config', 'unset', 'v1', 'raw.qemu')).status, 0);
});

vmTest("a VM whose QEMU dies behind the daemon's back shows Stopped at the next read of a kept listing", async (t) => {
  await ensureV1();
  if (await state('v1') !== 'v1,STOPPED') await lxc(d.socket, 'stop', '--force', 'v1');
  t.is((await lxc(d.socket, 'start', 'v1')).status, 0);
  const status = async () => ((await d.request('GET', '/1.0/instances?recursion=1')).json.metadata as { name: string; status: string }[])
    .find((i) => i.name === 'v1')?.status;
  // Read enough times for the listing to be kept.
  for (let i = 0; i < 3; i++) t.is(await status(), 'Running');
  for (const pid of qemuOf(dir)) process.kill(pid, 'SIGKILL');
  await waitFor(() => qemuOf(dir).length === 0, 10_000, 'QEMU to be gone');
  t.is(await status(), 'Stopped');
  // The record still says it was running (a restart would start it again): a start and a stop say otherwise.
  t.is((await lxc(d.socket, 'start', 'v1')).status, 0);
  t.is((await lxc(d.socket, 'stop', '--force', 'v1')).status, 0);
});

vmTest('a kill -9 of the daemon in the middle of a start leaves nothing the next boot does not clean', async (t) => {
  await ensureV1();
  if (await state('v1') !== 'v1,STOPPED') await lxc(d.socket, 'stop', '--force', 'v1');
  const marker = path.join(dir, 'qemu', 'v1', 'starting');
  const start = lxc(d.socket, 'start', 'v1');
  // QEMU shows in /proc as soon as it forks to daemonize, tens of ms before the daemon hears back:
  // the daemon is stopped there, with QEMU up and paused and the start not finished, then killed.
  const deadline = Date.now() + 30_000;
  while (qemuOf(dir).length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 1));
  d.child.kill('SIGSTOP');
  // One QEMU, or two for the instant its daemonizing parent has not exited yet.
  t.true(qemuOf(dir).length >= 1, 'QEMU was up when the daemon died');
  t.true(existsSync(marker), 'the start had not finished');
  d.child.kill('SIGKILL');
  await start;
  await new Promise((r) => setTimeout(r, 500));
  await stopDaemons();
  await restartDaemon();
  t.false(existsSync(marker), 'the half-done start was undone');
  t.deepEqual(qemuOf(dir), [], 'no stray QEMU');
  t.is(await state('v1'), 'v1,STOPPED');
  const again = await lxc(d.socket, 'start', 'v1');
  t.is(again.status, 0, again.stderr);
  t.is(await state('v1'), 'v1,RUNNING');
  t.is((await lxc(d.socket, 'stop', 'v1', '--force')).status, 0);
  t.deepEqual(qemuOf(dir), []);
});

vmTest('bad input: image and instance types that do not match, a root disk smaller than the image, an unknown raw.qemu option, a device a VM cannot take, a VM image without a disk', async (t) => {
  await ensureV1();
  container = buildBusyboxImage('gzip');
  t.is((await lxc(d.socket, 'image', 'import', container.unified, '--alias', 'ct')).status, 0);
  const asVm = await d.request('POST', '/1.0/instances', { name: 'v2', type: 'virtual-machine', source: { type: 'image', alias: 'ct' } });
  t.is(asVm.status, 400);
  t.regex(asVm.json.error, /container image/);
  const asContainer = await d.request('POST', '/1.0/instances', { name: 'v2', type: 'container', source: { type: 'image', alias: 'vm' } });
  t.is(asContainer.status, 400);
  t.regex(asContainer.json.error, /virtual-machine image/);
  // The client itself asks for the image's type when --vm is not given.
  t.is((await lxc(d.socket, 'init', 'vm', 'v2')).status, 0);
  t.is((await d.request('GET', '/1.0/instances/v2')).json.metadata.type, 'virtual-machine');
  t.is((await lxc(d.socket, 'delete', 'v2')).status, 0);

  const tiny = await lxc(d.socket, 'init', 'vm', 'v3', '--vm', '--device', 'root,size=1MiB');
  t.not(tiny.status, 0);
  t.regex(tiny.stderr, /smaller than the image/);
  t.is((await d.request('GET', '/1.0/instances/v3')).status, 404, 'no record left');
  t.false(existsSync(path.join(dir, 'storage-pools', 'default', 'virtual-machines', 'v3')), 'no volume left');

  const raw = await d.request('POST', '/1.0/instances', { name: 'v4', type: 'virtual-machine', source: { type: 'image', alias: 'vm' }, config: { 'raw.qemu': '-no-such-option' } });
  t.is(raw.status, 400);
  t.regex(raw.json.error, /raw\.qemu.*no-such-option/);
  t.is((await d.request('GET', '/1.0/instances/v4')).status, 404);

  const dev = await d.request('PATCH', '/1.0/instances/v1', { devices: { web: { type: 'proxy', listen: 'tcp:127.0.0.1:18099', connect: 'tcp:127.0.0.1:80' } } });
  t.is(dev.status, 400);
  t.regex(dev.json.error, /"proxy" devices are not supported on virtual machines/);
  // A host path is a 9p share on a VM (vm-disks.test.ts), but id shifting is for containers' mounts.
  const share = await d.request('PATCH', '/1.0/instances/v1', { devices: { share: { type: 'disk', source: tmpdir(), path: '/mnt', shift: 'true' } } });
  t.is(share.status, 400);
  t.regex(share.json.error, /"shift" cannot be used on a virtual machine/);

  // A VM image with no disk is refused at import.
  const noDisk = mkdtempSync(path.join(tmpdir(), 'corral-vm-nodisk-'));
  writeFileSync(path.join(noDisk, 'metadata.yaml'), 'architecture: x86_64\ncreation_date: 1700000000\n');
  spawnSync('tar', ['-C', noDisk, '-czf', path.join(noDisk, 'image.tar.gz'), 'metadata.yaml']);
  const imported = await lxc(d.socket, 'image', 'import', path.join(noDisk, 'image.tar.gz'), '--alias', 'nodisk');
  rmSync(noDisk, { recursive: true, force: true });
  t.not(imported.status, 0);
  t.regex(imported.stderr, /neither rootfs\/ nor rootfs\.img/);
  t.deepEqual(qemuOf(dir), []);
});
