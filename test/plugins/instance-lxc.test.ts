/**
 * The liblxc driver on its own: real busybox containers started, inspected, entered and stopped
 * through the driver object, with real host tools and no instances plugin. A second driver object
 * on the same data dir plays a restarted daemon.
 */
import test from 'ava';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { ApiError, type DeviceMount, type DeviceRunConfig, type DriverInstance, type ExecSpec, type HostTools } from '../../sdk/index.js';
import { LxcDriver } from '../../plugins/instance-lxc/driver.js';
import { lxcName } from '../../plugins/instance-lxc/paths.js';
import { readSubidRange, readSubidRanges } from '../../plugins/instance-lxc/idmap.js';
import { featuresOf, libraryFeatures, LXC_FEATURES, lxcEnvironment, probeLxc } from '../../plugins/instance-lxc/probe.js';
import { CONTAINER_PATH as PATH, lxcDriverFixture, runIn } from '../helpers/lxc-driver.js';
import { cpusetFile, memoryLimitFile, pidsMaxFile } from '../helpers/cgroup.js';
import { startDaemon, stopDaemons, waitFor } from '../helpers/daemon.js';

const { log, tools, run: RUN, scratch, image, dataDir, driver } = lxcDriverFixture('instance-lxc-test');
const started: { driver: LxcDriver; inst: DriverInstance }[] = [];
const subuid = readSubidRange('/etc/subuid');

function instance(suffix: string, config: Record<string, string> = {}, project = 'default', dir = dataDir): DriverInstance {
  const name = `t${RUN}-${suffix}`;
  const volumePath = path.join(dir, 'volumes', `${project}_${name}`);
  mkdirSync(path.join(volumePath, 'rootfs'), { recursive: true });
  execFileSync('tar', ['-x', '--numeric-owner', '-f', image.rootfs, '-C', path.join(volumePath, 'rootfs')]);
  return { project, name, type: 'container', architecture: 'x86_64', config: { ...config }, devices: {}, volumePath, logDir: path.join(dir, 'logs', name) };
}

const rootDisk = (inst: DriverInstance): DeviceRunConfig => ({ rootfs: { path: path.join(inst.volumePath, 'rootfs') } });

async function launch(inst: DriverInstance, mounts: DeviceMount[] = [], d = driver): Promise<Record<string, string>> {
  started.push({ driver: d, inst });
  return d.start(inst, [rootDisk(inst), ...(mounts.length ? [{ mounts }] : [])]);
}

const run = (inst: DriverInstance, command: string[], extra: Partial<ExecSpec> = {}) => runIn(driver, inst, command, extra);

/** Resolves once the accumulated text of a stream matches. */
function waitForText(stream: Readable, pattern: RegExp, timeoutMs = 5000): { done: Promise<string>; text: () => string } {
  let text = '';
  const done = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${pattern} in ${JSON.stringify(text)}`)), timeoutMs);
    stream.on('data', (c: Buffer) => {
      text += c.toString('utf8');
      if (pattern.test(text)) {
        clearTimeout(timer);
        resolve(text);
      }
    });
  });
  return { done, text: () => text };
}

function expectApiError(t: any, err: unknown, status: number, pattern?: RegExp): void {
  t.true(err instanceof ApiError, `expected an ApiError, got ${String(err)}`);
  t.is((err as ApiError).status, status);
  if (pattern) t.regex((err as ApiError).message, pattern);
}

/** Whether any liblxc monitor of this container is alive (looked up in /proc, not through the driver). */
function monitorRuns(inst: DriverInstance): boolean {
  return readdirSync('/proc').some((p) => {
    if (!/^\d+$/.test(p)) return false;
    try {
      return readFileSync(`/proc/${p}/cmdline`, 'utf8').startsWith(`[lxc monitor] ${driver.paths.lxcpath} ${lxcName(inst.project, inst.name)}`);
    } catch {
      return false;
    }
  });
}

function monitorPid(d: LxcDriver, inst: DriverInstance): number {
  return Number(readFileSync(d.paths.pidFile(lxcName(inst.project, inst.name)), 'utf8'));
}

test.after.always(async () => {
  for (const { driver: d, inst } of started) {
    spawnSync('lxc-stop', ['-n', lxcName(inst.project, inst.name), '-P', d.paths.lxcpath, '-k'], { stdio: 'ignore', timeout: 10000 });
  }
  await stopDaemons();
  rmSync(scratch, { recursive: true, force: true });
  rmSync(image.dir, { recursive: true, force: true });
});

test.serial('start and force stop a busybox container; the monitor is not a child of the daemon', async (t) => {
  const inst = instance('basic');
  t.is(await driver.status(inst), 'Stopped');
  let t0 = performance.now();
  await launch(inst);
  const startMs = performance.now() - t0;
  t.is(await driver.status(inst), 'Running');
  t.log(`start took ${startMs.toFixed(0)} ms (the bench tracks this figure)`);
  const config = readFileSync(driver.paths.config(inst.name), 'utf8');
  t.regex(config, /^lxc\.rootfs\.path = dir:.*\/rootfs$/m);
  t.regex(config, /^lxc\.rootfs\.options = idmap=container$/m);
  t.notRegex(config, /lxc\.include|lxc\.hook/);
  // Daemonized: reparented away from us, in a session of its own, so it outlives the daemon.
  const stat = readFileSync(`/proc/${monitorPid(driver, inst)}/stat`, 'utf8').split(') ')[1]!.split(' ');
  const ours = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  t.not(Number(stat[1]), process.pid);
  t.not(stat[3], ours[3]);
  await t.throwsAsync(launch(inst), { instanceOf: ApiError, message: /already running/ });
  t0 = performance.now();
  await driver.stop(inst, { force: true, timeoutMs: 0 });
  const stopMs = performance.now() - t0;
  t.is(await driver.status(inst), 'Stopped');
  // A forced stop never waits for a halt: far below any clean-stop timeout, even on a loaded machine.
  t.true(stopMs < 8000, `force stop took ${stopMs} ms`);
  t.false(existsSync(driver.paths.pidFile(inst.name)));
  // Stopping a stopped container is a no-op.
  await driver.stop(inst, { force: true, timeoutMs: 0 });
});

test.serial('a container started by a daemon killed with -9 keeps running and is seen by the next one', async (t) => {
  const inst = instance('crash');
  started.push({ driver, inst });
  const fixture = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'lxc-crash', 'start-and-wait.js');
  const child = spawn(process.execPath, [fixture, dataDir, JSON.stringify(inst), JSON.stringify([rootDisk(inst)])], { stdio: ['ignore', 'pipe', 'inherit'], detached: true });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c;
      if (out.includes('started')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`the fixture exited with ${code}`)));
  });
  // The whole process group of the dead daemon goes, as a service manager would do it.
  process.kill(-child.pid!, 'SIGKILL');
  await new Promise((resolve) => child.once('exit', resolve));
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.is(await driver.status(inst), 'Running');
  t.is((await run(inst, ['echo', 'still here'])).stdout, 'still here\n');
  await driver.stop(inst, { force: true, timeoutMs: 0 });
});

test.serial('a clean stop sends the halt signal busybox init obeys; an init that ignores it is killed after the timeout', async (t) => {
  const inst = instance('clean');
  await launch(inst);
  let t0 = performance.now();
  await driver.stop(inst, { force: false, timeoutMs: 10_000 });
  const cleanMs = performance.now() - t0;
  t.is(await driver.status(inst), 'Stopped');
  t.true(cleanMs < 9000, `clean stop took ${cleanMs} ms`);
  // busybox init ran its shutdown path (it prints this on the console).
  t.regex(readFileSync(driver.consoleLogPath(inst), 'utf8'), /going down|system halt/);

  const deaf = instance('deaf', { 'raw.lxc': 'lxc.signal.halt = SIGCONT' });
  await launch(deaf);
  t0 = performance.now();
  await driver.stop(deaf, { force: false, timeoutMs: 1000 });
  const waited = performance.now() - t0;
  t.is(await driver.status(deaf), 'Stopped');
  t.true(waited >= 900 && waited < 8000, `stop after timeout took ${waited} ms`);
});

test.serial('a halt signal that arrives before init is ready is sent again, so a clean stop right after a start does not wait out its timeout', async (t) => {
  const inst = instance('slowinit');
  // An init that sets up late: a shell (which ignores the halt signal as pid 1) becomes busybox init.
  const init = path.join(inst.volumePath, 'rootfs', 'sbin', 'init');
  rmSync(init);
  writeFileSync(init, '#!/bin/sh\nsleep 0.6\nexec /bin/busybox init\n');
  chmodSync(init, 0o755);
  await launch(inst);
  const t0 = performance.now();
  await driver.stop(inst, { force: false, timeoutMs: 10_000 });
  const ms = performance.now() - t0;
  t.is(await driver.status(inst), 'Stopped');
  t.true(ms < 8000, `clean stop took ${ms} ms`);
  t.regex(readFileSync(driver.consoleLogPath(inst), 'utf8'), /going down|system halt/);
});

test.serial('status spawns nothing, is cheap, and is right for a new driver object (a restarted daemon)', async (t) => {
  const inst = instance('status');
  await launch(inst);
  let spawned = 0;
  const helpers: string[] = [];
  const counting: HostTools = {
    run: (...a) => { spawned++; return tools.run(...a); },
    spawn: (...a) => {
      // State reads start one helper for the driver's whole life (live-state.ts), never one per read.
      if (a[0].endsWith('/corral-livestate')) helpers.push(a[0]);
      else spawned++;
      return tools.spawn(...a);
    },
    which: tools.which,
  };
  const restarted = new LxcDriver({ hostTools: counting, log, dataDir });
  t.is(await restarted.status(inst), 'Running');
  const t0 = performance.now();
  for (let i = 0; i < 500; i++) await restarted.status(inst);
  const ms = performance.now() - t0;
  t.log(`500 status calls took ${ms.toFixed(1)} ms`);
  const state = await restarted.state(inst);
  t.is(state.status, 'Running');
  t.true(state.pid > 0);
  for (let i = 0; i < 20; i++) await restarted.state(inst);
  t.is(spawned, 0);
  t.true(helpers.length <= 1, `state reads started ${helpers.length} helpers`);
  restarted.live.stop();
  // A stop by the other object (or by hand) is seen at once.
  await driver.stop(inst, { force: true, timeoutMs: 0 });
  t.is(await restarted.status(inst), 'Stopped');
  t.is(spawned, 0);
});

test.serial('state: pid, processes, cpu (container_cpu_time), memory and the container\'s interfaces read from the host', async (t) => {
  const inst = instance('state');
  await launch(inst);
  const s = await driver.state(inst);
  t.is(s.status, 'Running');
  t.true(s.pid > 0);
  t.is(readFileSync(`/proc/${s.pid}/comm`, 'utf8').trim(), 'init');
  t.true(s.processes >= 1);
  t.true(s.cpu.usage > 0);
  t.true(s.memory.usage > 0);
  t.true(s.memory.usage_peak >= s.memory.usage);
  t.truthy(s.network?.lo);
  t.is(s.network!.lo!.type, 'loopback');
  t.is(s.network!.lo!.mtu, 65536);
  // The loopback comes up with the container, as on the reference.
  t.is(s.network!.lo!.state, 'up');
  t.deepEqual(Object.keys(s.network!.lo!.counters), ['bytes_received', 'bytes_sent', 'packets_received', 'packets_sent', 'errors_received', 'errors_sent', 'packets_dropped_outbound', 'packets_dropped_inbound']);
  // Use it: addresses and counters show.
  t.is((await run(inst, ['sh', '-c', 'ping -c 1 -W 1 127.0.0.1 >/dev/null'])).code, 0);
  const up = (await driver.state(inst)).network!.lo!;
  t.is(up.state, 'up');
  t.true(up.counters.packets_received > 0);
  t.deepEqual(up.addresses.find((a) => a.family === 'inet'), { family: 'inet', address: '127.0.0.1', netmask: '8', scope: 'local' });
  if (existsSync('/proc/net/if_inet6')) t.deepEqual(up.addresses.find((a) => a.family === 'inet6'), { family: 'inet6', address: '::1', netmask: '128', scope: 'local' });
  await driver.stop(inst, { force: true, timeoutMs: 0 });
  const stopped = await driver.state(inst);
  t.like(stopped, { status: 'Stopped', pid: 0, processes: 0, network: null });
});

test.serial('exec: exit status, separate streams, environment, user and group, working directory', async (t) => {
  const inst = instance('exec');
  await launch(inst);
  const r = await run(inst, ['sh', '-c', 'echo to-out; echo to-err >&2; exit 3']);
  t.is(r.code, 3);
  t.is(r.stdout, 'to-out\n');
  t.is(r.stderr, 'to-err\n');
  const env = await run(inst, ['env'], { environment: { PATH, FOO: 'bar baz', EMPTY: '' } });
  const vars = env.stdout.trim().split('\n').sort();
  t.true(vars.includes('FOO=bar baz'));
  t.true(vars.includes('EMPTY='));
  t.false(vars.some((v) => v.startsWith('HOME=')), 'the daemon\'s environment does not leak in');
  t.is((await run(inst, ['sh', '-c', 'echo $(id -u):$(id -g)'], { user: 1000, group: 1000 })).stdout, '1000:1000\n');
  t.is((await run(inst, ['sh', '-c', 'echo $(id -u):$(id -g)'], { user: 1000, environment: { PATH } })).stdout, '1000:0\n');
  t.is((await run(inst, ['pwd'])).stdout, '/root\n');
  t.is((await run(inst, ['pwd'], { cwd: '/tmp' })).stdout, '/tmp\n');
  t.is((await run(inst, ['pwd'], { cwd: '/home/user', user: 1000, group: 1000 })).stdout, '/home/user\n');
  t.is((await run(inst, ['pwd'], { cwd: '/does/not/exist' })).stdout, '/\n');
  t.is((await run(inst, ['pwd'], { environment: { PATH } })).stdout, '/\n');
  // Arguments are passed as they are, never through a shell.
  t.is((await run(inst, ['echo', '$(id)', '"; exit 9'], { cwd: '/tmp' })).stdout, '$(id) "; exit 9\n');
  t.not((await run(inst, ['/no/such/command'])).code, 0);
  const times: number[] = [];
  for (let i = 0; i < 10; i++) {
    const t0 = performance.now();
    t.is((await run(inst, ['true'])).code, 0);
    times.push(performance.now() - t0);
  }
  const median = times.sort((a, b) => a - b)[5]!;
  t.log(`exec true median ${median.toFixed(0)} ms (the bench tracks exec latency)`);
  await t.throwsAsync(driver.exec(instance('never-started'), { command: ['true'], environment: {}, interactive: false }), { instanceOf: ApiError, message: /not running/ });
});

test.serial('interactive exec runs under a pty of the requested size and follows resizes', async (t) => {
  const inst = instance('pty');
  await launch(inst);
  const session = await driver.exec(inst, { command: ['/bin/sh'], environment: { PATH, HOME: '/root', TERM: 'xterm' }, interactive: true, width: 100, height: 30 });
  t.is(session.stderr, undefined);
  // Wait for the prompt: busybox sh reads its terminal's reply to a cursor query first.
  await waitForText(session.stdout, /# /).done;
  const first = waitForText(session.stdout, /30 100/);
  session.stdin.write('stty size\n');
  await first.done;
  const second = waitForText(session.stdout, /40 120/);
  session.resize(120, 40);
  session.stdin.write('stty size\n');
  await second.done;
  const tty = waitForText(session.stdout, /\/dev\/pts\/\d+/);
  session.stdin.write('tty\n');
  await tty.done;
  session.stdin.write('exit 7\n');
  t.is(await session.exited, 7);
});

test.serial('signals reach the command inside the container; killed by a signal is 128+n', async (t) => {
  const inst = instance('signal');
  await launch(inst);
  const session = await driver.exec(inst, { command: ['sleep', '100'], environment: { PATH }, interactive: false });
  session.stdin.end();
  session.signal(15); // before lxc-attach has even attached: delivered once the command exists
  t.is(await session.exited, 128 + 15);
  const trap = await driver.exec(inst, { command: ['sh', '-c', 'trap "echo got-hup; exit 5" HUP; echo ready; while true; do sleep 0.1; done'], environment: { PATH }, interactive: false });
  trap.stdin.end();
  const ready = waitForText(trap.stdout, /ready/);
  await ready.done;
  trap.signal(1);
  t.is(await trap.exited, 5);
  t.regex(ready.text(), /got-hup/);
  // Nothing left behind inside.
  t.is((await run(inst, ['sh', '-c', 'ps | grep -c "[s]leep 100" || true'])).stdout.trim(), '0');
});

test.serial('console: input reaches the console shell, output and the console log show it; close detaches', async (t) => {
  const inst = instance('console');
  await launch(inst);
  const session = await driver.console(inst, { width: 80, height: 25 });
  const seen = waitForText(session.output, /console-42/);
  session.input.write('\n');
  await new Promise((r) => setTimeout(r, 200));
  session.input.write('echo console-$((6*7))\n');
  const text = await seen.done;
  t.notRegex(text, /Connected to tty/);
  // liblxc's monitor copies console output to the log on its own schedule.
  await waitFor(() => /console-42/.test(readFileSync(driver.consoleLogPath(inst), 'utf8')), 5000, 'the console log');
  // A Ctrl+a typed by the client reaches the console (lxc-console would take it as its escape key).
  const ctrlA = waitForText(session.output, /x\^Ay/);
  session.input.write('cat -v\n');
  await new Promise((r) => setTimeout(r, 200));
  session.input.write('x\x01y\n');
  await ctrlA.done;
  session.input.write('\x04');
  const ended = new Promise((resolve) => session.output.once('end', resolve));
  session.close();
  await ended;
  t.pass();
});

test.serial('freeze and unfreeze: status Frozen, exec refused while frozen, a frozen container can be force-stopped', async (t) => {
  const inst = instance('freeze');
  await launch(inst);
  await driver.freeze(inst);
  t.is(await driver.status(inst), 'Frozen');
  t.is((await driver.state(inst)).status, 'Frozen');
  await t.throwsAsync(driver.exec(inst, { command: ['true'], environment: {}, interactive: false }), { instanceOf: ApiError, message: /frozen/ });
  await driver.unfreeze(inst);
  t.is(await driver.status(inst), 'Running');
  t.is((await run(inst, ['true'])).code, 0);
  await driver.freeze(inst);
  await driver.stop(inst, { force: true, timeoutMs: 0 });
  t.is(await driver.status(inst), 'Stopped');
  await t.throwsAsync(driver.freeze(inst), { instanceOf: ApiError, message: /not running/ });
});

test.serial('limits.memory, limits.processes and limits.cpu go into the cgroup at start and live', async (t) => {
  const inst = instance('limits', { 'limits.memory': '64MiB', 'limits.processes': '50', 'limits.cpu': '1' });
  await launch(inst);
  const { pid } = await driver.state(inst);
  t.is(readFileSync(memoryLimitFile(pid), 'utf8').trim(), String(64 * 1024 * 1024));
  t.is(readFileSync(pidsMaxFile(pid), 'utf8').trim(), '50');
  t.regex(readFileSync(cpusetFile(pid), 'utf8').trim(), /^\d+$/);

  await driver.update(inst, { 'limits.memory': '128MB', 'limits.processes': '5', 'limits.cpu': '0' });
  t.is(readFileSync(memoryLimitFile(pid), 'utf8').trim(), String(128_000_000));
  t.is(readFileSync(pidsMaxFile(pid), 'utf8').trim(), '5');
  // The process limit bites: five sleeps cannot all fork.
  const forks = await run(inst, ['sh', '-c', 'for i in 1 2 3 4 5 6; do sleep 2 & done; wait']);
  t.regex(forks.stderr, /fork|Resource temporarily unavailable/i);

  // A limit the kernel refuses leaves everything as it was (the processes change is undone).
  const err = await t.throwsAsync(driver.update(inst, { 'limits.processes': '77', 'limits.memory': '1' }));
  expectApiError(t, err, 400, /limits\.memory/);
  t.is(readFileSync(pidsMaxFile(pid), 'utf8').trim(), '5');
  t.is(readFileSync(memoryLimitFile(pid), 'utf8').trim(), String(128_000_000));

  await driver.update(inst, { 'limits.memory': undefined, 'limits.processes': undefined, 'limits.cpu': '0-1' });
  t.true(Number(readFileSync(memoryLimitFile(pid), 'utf8').trim()) > 2 ** 40 || readFileSync(memoryLimitFile(pid), 'utf8').trim() === 'max');
  t.is(readFileSync(pidsMaxFile(pid), 'utf8').trim(), 'max');
  const cpus = readFileSync('/sys/devices/system/cpu/online', 'utf8').trim();
  if (cpus === '0-1') t.is(readFileSync(cpusetFile(pid), 'utf8').trim(), '0-1');
  await t.throwsAsync(driver.update(inst, { 'security.privileged': 'true' }), { instanceOf: ApiError, message: /while the instance is running/ });
  await t.throwsAsync(driver.update(inst, { 'limits.memory': 'lots' }), { instanceOf: ApiError, message: /Invalid value/ });
});

test.serial('limits.memory as a percentage of the host memory', async (t) => {
  const inst = instance('pct', { 'limits.memory': '10%' });
  await launch(inst);
  const { pid } = await driver.state(inst);
  const total = Number(/MemTotal:\s+(\d+)/.exec(readFileSync('/proc/meminfo', 'utf8'))![1]) * 1024;
  const limit = Number(readFileSync(memoryLimitFile(pid), 'utf8').trim());
  // The kernel rounds the limit down to whole pages.
  t.true(Math.abs(limit - total / 10) < 8192, `limit ${limit} for ${total}`);
});

test.serial('id_map: the shared map by default, as the reference stores it; raw.idmap punches host ids through', async (t) => {
  const { start, size } = subuid;
  const entry = (uid: boolean, gid: boolean, host: number, ns: number, range: number) => ({ Isuid: uid, Isgid: gid, Hostid: host, Nsid: ns, Maprange: range });
  const plain = await driver.initialize(instance('plainmap'), []);
  t.deepEqual(JSON.parse(plain['volatile.idmap.next']!), [entry(true, false, start, 0, size), entry(false, true, start, 0, size)]);
  t.is(plain['volatile.idmap.base'], '0');

  // The layout the reference stores for `both 1000 1000`.
  const inst = instance('shared', { 'raw.idmap': 'both 1000 1000' });
  const keys = await driver.initialize(inst, []);
  const half = (uid: boolean) => [entry(uid, !uid, start, 0, 1000), entry(true, true, 1000, 1000, 1), entry(uid, !uid, start + 1001, 1001, size - 1001)];
  t.is(keys['volatile.idmap.base'], '0');
  t.is(keys['volatile.last_state.idmap'], '[]');
  t.deepEqual(JSON.parse(keys['volatile.idmap.next']!), [...half(true), ...half(false)]);
  Object.assign(inst.config, keys);
  // Host id 1000 is not root's to map unless /etc/subuid says so: a clear refusal, nothing started.
  const delegatedTo1000 = readSubidRanges('/etc/subuid').some((r) => r.start <= 1000 && r.start + r.size > 1000);
  if (!delegatedTo1000) {
    const err = await t.throwsAsync(launch(inst));
    expectApiError(t, err, 400, /host uid 1000, which \/etc\/subuid does not give to root \(add "root:1000:1"/);
    t.is(await driver.status(inst), 'Stopped');
  } else {
    t.log('not checked here: the refusal of host uid 1000, which this host\'s /etc/subuid gives to root');
  }

  // A host range root does own (another /etc/subuid entry) maps straight through.
  const spare = readSubidRanges('/etc/subuid').find((r) => r.start !== start && readSubidRanges('/etc/subgid').some((g) => g.start === r.start));
  if (spare) {
    const through = instance('through', { 'raw.idmap': `both ${spare.start} 1000` });
    Object.assign(through.config, await driver.initialize(through, []));
    // A host directory that host id spare.start owns, bind-mounted without shifting.
    const hostOwned = path.join(scratch, 'host-owned');
    mkdirSync(hostOwned, { mode: 0o755 });
    execFileSync('chown', [`${spare.start}:${spare.start}`, hostOwned]);
    const applied = await launch(through, [{ source: hostOwned, target: '/mnt/host-owned' }]);
    const { pid } = await driver.state(through);
    const uidMap = readFileSync(`/proc/${pid}/uid_map`, 'utf8').trim().split('\n').map((l) => l.trim().split(/\s+/).map(Number));
    t.deepEqual(uidMap, [[0, start, 1000], [1000, spare.start, 1], [1001, start + 1001, size - 1001]]);
    t.is(applied['volatile.idmap.next'], through.config['volatile.idmap.next']);
    // Container id 1000 is that host id: the directory shows as 1000's and 1000 may write there.
    t.is((await run(through, ['stat', '-c', '%u:%g', '/mnt/host-owned'])).stdout.trim(), '1000:1000');
    t.is((await run(through, ['touch', '/mnt/host-owned/by-1000'], { user: 1000, group: 1000 })).code, 0);
    t.is(statSync(path.join(hostOwned, 'by-1000')).uid, spare.start);
  } else {
    t.log('not checked here: mapping a second /etc/subuid range of root straight through (this host has only one)');
  }

  await t.throwsAsync(driver.validate({ 'raw.idmap': 'garbage' }), { instanceOf: ApiError, message: /Invalid ID map line "garbage"/ });
  await t.throwsAsync(driver.validate({ 'raw.idmap': 'both 1-2 3' }), { instanceOf: ApiError, message: /different sizes/ });
  const split = await driver.initialize(instance('rawuid', { 'raw.idmap': 'uid 50-60 500-510' }), []);
  t.deepEqual(JSON.parse(split['volatile.idmap.next']!).slice(0, 3), [entry(true, false, start, 0, 500), entry(true, false, 50, 500, 11), entry(true, false, start + 511, 511, size - 511)]);
});

test.serial('id_map: isolated maps get distinct ranges at creation and at start, security.idmap.size sizes them', async (t) => {
  const a = instance('isoa', { 'security.idmap.isolated': 'true' });
  Object.assign(a.config, await driver.initialize(a, []));
  const b = instance('isob', { 'security.idmap.isolated': 'true', 'security.idmap.size': '100000' });
  Object.assign(b.config, await driver.initialize(b, [a]));
  t.is(a.config['volatile.idmap.base'], String(subuid.start + 65536));
  t.is(b.config['volatile.idmap.base'], String(subuid.start + 65536 * 2));
  t.deepEqual(JSON.parse(b.config['volatile.idmap.next']!)[0], { Isuid: true, Isgid: false, Hostid: subuid.start + 131072, Nsid: 0, Maprange: 100000 });
  await launch(a);
  await launch(b);
  const mapOf = async (inst: DriverInstance) => readFileSync(`/proc/${(await driver.state(inst)).pid}/uid_map`, 'utf8').trim().split(/\s+/).map(Number);
  const [, hostA, sizeA] = await mapOf(a);
  const [, hostB, sizeB] = await mapOf(b);
  t.is(sizeA, 65536);
  t.is(sizeB, 100000);
  t.true(hostA! + sizeA! <= hostB! || hostB! + sizeB! <= hostA!, 'ranges do not overlap');
  // Created without knowing the others (as after an edit): the start moves it clear of them.
  const c = instance('isoc', { 'security.idmap.isolated': 'true' });
  Object.assign(c.config, await driver.initialize(c, []));
  t.is(c.config['volatile.idmap.base'], a.config['volatile.idmap.base']);
  const keys = await launch(c);
  const [, hostC, sizeC] = await mapOf(c);
  for (const [host, size] of [[hostA!, sizeA!], [hostB!, sizeB!]]) t.true(hostC! + sizeC! <= host || host + size <= hostC!);
  t.is(keys['volatile.idmap.base'], String(hostC));
  // The rootfs is idmapped, not chowned: files on disk keep container ids.
  t.is(statSync(path.join(c.volumePath, 'rootfs/etc/passwd')).uid, 0);
  t.is((await run(c, ['stat', '-c', '%u', '/etc/passwd'])).stdout.trim(), '0');
  await t.throwsAsync(driver.initialize(instance('isohuge', { 'security.idmap.isolated': 'true', 'security.idmap.size': String(subuid.size + 1) }), []), { instanceOf: ApiError, message: /Not enough uid\/gid/ });
});

test.serial('id_map_base: security.idmap.base places an isolated map where asked', async (t) => {
  const base = subuid.start + 50_000_000;
  const inst = instance('base', { 'security.idmap.isolated': 'true', 'security.idmap.base': String(base) });
  const keys = await driver.initialize(inst, []);
  t.is(keys['volatile.idmap.base'], String(base));
  Object.assign(inst.config, keys);
  await launch(inst);
  const { pid } = await driver.state(inst);
  t.deepEqual(readFileSync(`/proc/${pid}/gid_map`, 'utf8').trim().split(/\s+/).map(Number), [0, base, 65536]);
});

test.serial('id_map_current: a start reports the map the kernel applied', async (t) => {
  const inst = instance('current', { 'security.idmap.isolated': 'true', 'security.idmap.size': '70000' });
  Object.assign(inst.config, await driver.initialize(inst, []));
  const keys = await launch(inst);
  const current = JSON.parse(keys['volatile.idmap.current']!) as { Isuid: boolean; Isgid: boolean; Hostid: number; Nsid: number; Maprange: number }[];
  const { pid } = await driver.state(inst);
  const kernel = (file: string) => readFileSync(`/proc/${pid}/${file}`, 'utf8').trim().split('\n').map((l) => l.trim().split(/\s+/).map(Number));
  t.deepEqual(kernel('uid_map'), current.filter((e) => e.Isuid).map((e) => [e.Nsid, e.Hostid, e.Maprange]));
  t.deepEqual(kernel('gid_map'), current.filter((e) => e.Isgid).map((e) => [e.Nsid, e.Hostid, e.Maprange]));
  t.is(keys['volatile.idmap.current'], keys['volatile.idmap.next']);
  t.is(keys['volatile.last_state.idmap'], '[]');
});

test.serial('a privileged container has no id map', async (t) => {
  const inst = instance('priv', { 'security.privileged': 'true', 'security.idmap.isolated': 'true' });
  const keys = await driver.initialize(inst, []);
  t.deepEqual(keys, { 'volatile.idmap.base': '0', 'volatile.idmap.next': '[]', 'volatile.last_state.idmap': '[]' });
  Object.assign(inst.config, keys);
  await launch(inst);
  const { pid } = await driver.state(inst);
  t.is(readFileSync(`/proc/${pid}/uid_map`, 'utf8').trim().split(/\s+/).join(' '), '0 0 4294967295');
  t.notRegex(readFileSync(driver.paths.config(inst.name), 'utf8'), /lxc\.idmap|idmap=container/);
  t.is((await run(inst, ['id', '-u'])).stdout.trim(), '0');
});

test.serial('security.nesting lets the container mount proc in a nested user namespace', async (t) => {
  const nestedProc = ['unshare', '-U', '-r', '-p', '-f', '-m', '--mount-proc', 'true'];
  const plain = instance('nonest');
  await launch(plain);
  t.not((await run(plain, nestedProc)).code, 0);
  const nesting = instance('nest', { 'security.nesting': 'true' });
  await launch(nesting);
  t.is((await run(nesting, nestedProc)).code, 0);
});

test.serial('disk devices: read-only bind mounts, shifted mounts, single files, propagation', async (t) => {
  const share = path.join(scratch, 'share');
  mkdirSync(share);
  chmodSync(share, 0o755);
  writeFileSync(path.join(share, 'hello.txt'), 'hi from the host\n');
  const writable = path.join(scratch, 'writable');
  mkdirSync(writable, { mode: 0o777 });
  const single = path.join(scratch, 'single.conf');
  writeFileSync(single, 'key=value\n');
  const inst = instance('mounts');
  await launch(inst, [
    { source: share, target: '/mnt/share', readonly: true },
    { source: writable, target: '/mnt/shifted', shift: true, propagation: 'rslave' },
    { source: share, target: '/mnt/unshifted' },
    { source: single, target: '/etc/single.conf', file: true },
    { source: path.join(scratch, 'missing'), target: '/mnt/missing', optional: true },
  ]);
  t.is((await run(inst, ['cat', '/mnt/share/hello.txt'])).stdout, 'hi from the host\n');
  const write = await run(inst, ['touch', '/mnt/share/nope']);
  t.not(write.code, 0);
  t.regex(write.stderr, /Read-only/i);
  t.false(existsSync(path.join(share, 'nope')));
  // Shifted: host root shows as container root; unshifted it is nobody.
  t.is((await run(inst, ['stat', '-c', '%u', '/mnt/shifted'])).stdout.trim(), '0');
  t.is((await run(inst, ['stat', '-c', '%u', '/mnt/unshifted'])).stdout.trim(), '65534');
  t.is((await run(inst, ['touch', '/mnt/shifted/made-inside'])).code, 0);
  t.is(statSync(path.join(writable, 'made-inside')).uid, 0);
  t.is((await run(inst, ['cat', '/etc/single.conf'])).stdout, 'key=value\n');
  t.regex(readFileSync(driver.paths.config(inst.name), 'utf8'), /^lxc\.mount\.entry = \S+writable mnt\/shifted none bind,create=dir,rslave,idmap=container 0 0$/m);
});

test.serial('raw.lxc is appended after the generated config', async (t) => {
  const inst = instance('raw', { 'raw.lxc': 'lxc.uts.name = from-raw-lxc\n# a comment\n' });
  await launch(inst);
  t.is((await run(inst, ['hostname'])).stdout.trim(), 'from-raw-lxc');
  const config = readFileSync(driver.paths.config(inst.name), 'utf8').trim().split('\n');
  t.is(config.at(-1), 'lxc.uts.name = from-raw-lxc');
  t.true(config.indexOf(`lxc.uts.name = ${inst.name}`) < config.length - 1);
});

test.serial('a start that fails leaves nothing running and says why', async (t) => {
  const bad = instance('badraw', { 'raw.lxc': 'lxc.bogus = 1' });
  const err = await t.throwsAsync(launch(bad));
  expectApiError(t, err, 400, /lxc\.bogus/);
  t.is(await driver.status(bad), 'Stopped');
  t.false(existsSync(driver.paths.pidFile(bad.name)));
  t.false(monitorRuns(bad));

  const noRoot = instance('noroot');
  rmSync(path.join(noRoot.volumePath, 'rootfs'), { recursive: true });
  const err2 = await t.throwsAsync(launch(noRoot));
  expectApiError(t, err2, 500, /Failed to start the instance: .+/);
  t.is(await driver.status(noRoot), 'Stopped');

  const noInit = instance('noinit');
  rmSync(path.join(noInit.volumePath, 'rootfs/sbin/init'));
  const err3 = await t.throwsAsync(launch(noInit));
  t.true(err3 instanceof ApiError);
  t.is(await driver.status(noInit), 'Stopped');
  t.false(monitorRuns(noInit));
});

test('validate refuses what the reference refuses, what liblxc cannot parse, and bad limits', async (t) => {
  const refused: [Record<string, string>, RegExp][] = [
    [{ 'raw.lxc': 'lxc.log.file = /tmp/x' }, /lxc\.logfile is not allowed/],
    [{ 'raw.lxc': 'lxc.net.0.type = veth' }, /Only interface-specific ipv4\/ipv6 lxc\.net\. keys/],
    [{ 'raw.lxc': 'garbage' }, /Invalid raw\.lxc line: garbage/],
    [{ 'raw.lxc': 'lxc.ephemeral = 1' }, /lxc\.ephemeral is not allowed/],
    [{ 'raw.lxc': 'lxc.prlimit.nofile = 1' }, /Process limits/],
    [{ 'limits.memory': 'abc' }, /Invalid value: abc/],
    [{ 'limits.memory': '10XB' }, /Invalid value: 10XB/],
    [{ 'limits.cpu': 'abc' }, /Invalid CPU limit/],
    [{ 'limits.cpu': '0-4000000000' }, /CPU id 4000000000 is out of range/],
    [{ 'limits.processes': 'abc' }, /integer/],
    [{ 'security.idmap.size': 'x' }, /uint32/],
    [{ 'raw.lxc': 'LXC.Log.File = /tmp/x' }, /lxc\.logfile is not allowed/],
    // liblxc's own verdict, naming the line.
    [{ 'raw.lxc': 'lxc.uts.name = a\nlxc.notaconfigkey = invalid' }, /liblxc cannot parse the line "lxc\.notaconfigkey = invalid": .*Unsupported config key/],
    [{ 'raw.lxc': 'lxc.cap.drop = notacap' }, /"lxc\.cap\.drop = notacap": .*capability/],
    [{ 'raw.lxc': 'lxc.tty.max = abc' }, /"lxc\.tty\.max = abc"/],
  ];
  for (const [config, message] of refused) await t.throwsAsync(driver.validate(config), { instanceOf: ApiError, message }, JSON.stringify(config));
  const accepted: Record<string, string>[] = [
    { 'raw.lxc': 'lxc.net.0.ipv4.address = 10.0.0.2/24\nlxc.rootfs.options = idmap=container' }, { 'raw.lxc': 'notlxc.key = 1' },
    { 'limits.memory': '1GiB' }, { 'limits.memory': '50%' }, { 'limits.cpu': '0-1,3' }, { 'limits.processes': '-1' },
  ];
  for (const ok of accepted) await t.notThrowsAsync(driver.validate(ok), JSON.stringify(ok));
  const keys = new Map(driver.configKeys.map((k) => [k.key, k]));
  for (const key of ['security.idmap.isolated', 'security.idmap.size', 'security.idmap.base', 'security.privileged', 'security.nesting', 'raw.lxc', 'raw.idmap', 'limits.cpu', 'limits.memory', 'limits.processes', 'volatile.idmap.base', 'volatile.idmap.next', 'volatile.idmap.current', 'volatile.last_state.idmap']) {
    t.is(keys.get(key)?.scope, 'instance', key);
  }
  t.throws(() => keys.get('limits.memory')!.validate!('abc'), { message: /Invalid value/ });
  t.throws(() => keys.get('security.nesting')!.validate!('maybe'), { message: /boolean/ });
  t.throws(() => keys.get('raw.lxc')!.validate!('lxc.syslog = x'), { message: /syslog/ });
  t.true(keys.get('limits.memory')!.live);
  t.is(keys.get('security.idmap.base')!.extension, 'id_map_base');
  t.is(keys.get('volatile.idmap.current')!.extension, 'id_map_current');
});

test.serial('projects get their own container names; remove and crash-leftover cleanup', async (t) => {
  const dir = path.join(scratch, 'cleanup-data');
  mkdirSync(dir);
  const own = new LxcDriver({ hostTools: tools, log, dataDir: dir });
  const inProject = instance('proj', {}, 'p1', dir);
  await launch(inProject, [], own);
  t.true(existsSync(own.paths.config(`p1_${inProject.name}`)));
  t.is(await own.status(inProject), 'Running');
  await t.throwsAsync(own.remove(inProject), { instanceOf: ApiError, message: /running/ });
  // A leftover of a crash (no record) that is stopped is removed; a running one is kept.
  mkdirSync(path.join(own.paths.lxcpath, 'leftover'));
  writeFileSync(path.join(own.paths.lxcpath, 'leftover', 'config'), 'lxc.uts.name = leftover\n');
  await own.cleanup([]);
  t.false(existsSync(path.join(own.paths.lxcpath, 'leftover')));
  t.true(existsSync(own.paths.dir(`p1_${inProject.name}`)));
  t.is(await own.status(inProject), 'Running');
  await own.stop(inProject, { force: true, timeoutMs: 0 });
  await own.cleanup([{ project: 'p1', name: inProject.name }]);
  t.true(existsSync(own.paths.dir(`p1_${inProject.name}`)));
  await own.remove(inProject);
  t.false(existsSync(own.paths.dir(`p1_${inProject.name}`)));
});

test.serial('lxc_features and the driver environment come from the installed liblxc', async (t) => {
  const probe = await probeLxc(tools, driver.cgroups);
  t.true(probe.operational);
  t.is(probe.version, execFileSync('lxc-start', ['--version'], { encoding: 'utf8' }).trim());
  t.deepEqual(Object.keys(probe.features).sort(), [...LXC_FEATURES].sort());
  // What liblxc itself answers through lxc_has_api_extension().
  const script = `import ctypes, json, sys\nlib = ctypes.CDLL("liblxc.so.1")\nlib.lxc_has_api_extension.argtypes = [ctypes.c_char_p]\nlib.lxc_has_api_extension.restype = ctypes.c_bool\nprint(json.dumps({n: str(bool(lib.lxc_has_api_extension(n.encode()))).lower() for n in sys.argv[1:]}))`;
  const answer = JSON.parse(execFileSync('/usr/bin/python3', ['-c', script, ...LXC_FEATURES], { encoding: 'utf8' }));
  t.deepEqual(probe.features, answer);
  // Every name here is there: a name counts only as a whole string, also next to another one.
  const made = featuresOf(Buffer.from('\0pidfd\0cgroup2\0xdevpts_fd\0network_ipvlan_more\0seccomp_notify'));
  t.like(made, { pidfd: 'true', cgroup2: 'true', devpts_fd: 'false', network_ipvlan: 'false', seccomp_notify: 'false', core_scheduling: 'false' });
  // The same through grep, as the probe looks first: whole NUL-terminated strings only.
  const fake = path.join(mkdtempSync(path.join(tmpdir(), 'corral-liblxc-')), 'liblxc.so.1');
  writeFileSync(fake, '\0pidfd\0cgroup2\0xdevpts_fd\0network_ipvlan_more\0seccomp_notifyx\0');
  t.like(await libraryFeatures(tools, fake), { pidfd: 'true', cgroup2: 'true', devpts_fd: 'false', network_ipvlan: 'false', seccomp_notify: 'false', core_scheduling: 'false' });
  rmSync(path.dirname(fake), { recursive: true, force: true });

  const env = lxcEnvironment(() => probe);
  t.like(env({ driver: '', driver_version: '' }), { driver: 'lxc', driver_version: probe.version });
  t.like(env({ driver: 'qemu', driver_version: '8.0' }), { driver: 'qemu | lxc', driver_version: `8.0 | ${probe.version}` });
  t.deepEqual(env({ driver: '' }).lxc_features, probe.features);
  // server_instance_driver_operational: a driver that cannot run is not listed.
  const down = lxcEnvironment(() => ({ operational: false, reason: 'test', version: '', features: {} }));
  t.deepEqual(down({ driver: '', driver_version: '' }), { driver: '', driver_version: '' });
});

test.serial('GET /1.0 of a daemon with the driver lists it as operational (server_instance_driver_operational), with its features and extensions', async (t) => {
  const d = await startDaemon({ plugins: 'edge' });
  const info = (await d.request('GET', '/1.0')).json.metadata;
  for (const ext of ['id_map', 'id_map_base', 'id_map_current', 'lxc_features', 'server_instance_driver_operational']) t.true(info.api_extensions.includes(ext), ext);
  t.is(info.environment.driver, 'lxc');
  t.is(info.environment.driver_version, execFileSync('lxc-start', ['--version'], { encoding: 'utf8' }).trim());
  t.deepEqual(Object.keys(info.environment.lxc_features).sort(), [...LXC_FEATURES].sort());
  await d.stop();
});
