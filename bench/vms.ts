/**
 * Virtual machine scenarios (the test VM image under TCG): cold start to a guest agent that answers
 * an exec, beside the same disk booted by bare QEMU to the console's shell; the first exec and the
 * exec round trip against a container's in the same run; the daemon's memory per running VM (QEMU's
 * own beside it); and the stop of a guest that ignores the ACPI power button.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { startWithPool, type Daemon } from '../test/helpers/daemon.js';
import { buildBusyboxImage } from '../test/helpers/busybox-image.js';
import { importImage } from '../test/helpers/api.js';
import { bootDisk, importTestVmImage, testVmImage, vmProblem } from '../test/helpers/vm-image.js';
import { call, median, timed, type Row } from './containers.js';

const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
const SIZE = '512MiB';
const MEMORY = '256MiB';

const launch = (d: Daemon, name: string, config: Record<string, string> = {}) => call(d, 'POST', '/1.0/instances', {
  name, type: 'virtual-machine', source: { type: 'image', alias: 'busybox-vm' },
  config: { 'limits.memory': MEMORY, 'limits.cpu': '1', ...config }, devices: { root: { type: 'disk', path: '/', pool: 'default', size: SIZE } },
});
const state = (d: Daemon, name: string, action: string, extra: Record<string, unknown> = {}) => call(d, 'PUT', `/1.0/instances/${name}/state`, { action, ...extra });
const exec = (d: Daemon, name: string) => call(d, 'POST', `/1.0/instances/${name}/exec`, { command: ['true'], 'wait-for-websocket': false, interactive: false });

/** Milliseconds from `since` until an exec in the guest succeeds (the agent answers). */
async function agentReady(d: Daemon, name: string, since: number, boundMs = 120_000): Promise<number> {
  for (;;) {
    try {
      await exec(d, name);
      return performance.now() - since;
    } catch (err) {
      if (performance.now() - since > boundMs) throw new Error(`the agent of ${name} did not answer within ${boundMs} ms: ${(err as Error).message}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/** The same disk booted by bare QEMU (direct kernel, TCG) to the console's shell prompt: the floor. */
async function bareBoot(): Promise<number> {
  const work = mkdtempSync(path.join(tmpdir(), 'corral-bench-vm-'));
  const guest = bootDisk((await testVmImage()).rootfs, work, 'bare');
  try {
    return await guest.waitFor('/ # ', 120_000);
  } finally {
    guest.kill();
    await guest.exited;
    rmSync(work, { recursive: true, force: true });
  }
}

export async function vmScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const missing = vmProblem();
  if (missing) {
    rows.push({ scenario: 'virtual machines', value: `skipped: ${missing}` });
    return;
  }
  const RUNS = Number(process.env.BENCH_VM_RUNS ?? 3);
  const image = buildBusyboxImage('gzip');
  const d = await startWithPool({ plugins: 'full' });
  try {
    await importTestVmImage(d.socket, 'busybox-vm');
    await importImage(d, image.unified, 'bb');

    // Cold start to agent-ready, against bare QEMU to the shell on the same disk.
    const ready: number[] = [];
    const bare: number[] = [];
    const firstExec: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      await launch(d, `cold${i}`);
      const t0 = performance.now();
      await state(d, `cold${i}`, 'start');
      ready.push(await agentReady(d, `cold${i}`, t0));
      firstExec.push(await timed(() => exec(d, `cold${i}`)));
      await state(d, `cold${i}`, 'stop', { force: true });
      await call(d, 'DELETE', `/1.0/instances/cold${i}`);
      bare.push(await bareBoot());
    }
    results.vm_cold_start_ms = { agent_ready: median(ready), bare_qemu_shell: median(bare), first_exec: median(firstExec) };
    rows.push({ scenario: `VM cold start to agent-ready, TCG (median of ${RUNS})`, value: `${median(ready).toFixed(0)} ms (bare QEMU to the console's shell ${median(bare).toFixed(0)} ms, ${(median(ready) / median(bare)).toFixed(2)}x)`, target: '< 3000 ms' });
    rows.push({ scenario: 'VM first exec after agent-ready', value: `${median(firstExec).toFixed(1)} ms`, target: '< 100 ms' });

    // Exec round trip, VM against container, alternated so load hits both alike.
    await launch(d, 'rt');
    await state(d, 'rt', 'start');
    await agentReady(d, 'rt', performance.now());
    await call(d, 'POST', '/1.0/instances', { name: 'ct', source: { type: 'image', alias: 'bb' } });
    await state(d, 'ct', 'start');
    const vmExec: number[] = [];
    const ctExec: number[] = [];
    for (let i = 0; i < 20; i++) {
      vmExec.push(await timed(() => exec(d, 'rt')));
      ctExec.push(await timed(() => exec(d, 'ct')));
    }
    results.vm_exec_round_trip_ms = { vm: median(vmExec), container: median(ctExec) };
    rows.push({ scenario: 'exec round trip, VM (median of 20)', value: `${median(vmExec).toFixed(1)} ms (container ${median(ctExec).toFixed(1)} ms, ${(median(vmExec) / median(ctExec)).toFixed(2)}x)`, target: '<= 3x the container' });
    await state(d, 'ct', 'stop', { force: true });
    await call(d, 'DELETE', '/1.0/instances/ct');

    // Daemon memory per running VM; QEMU's own beside it.
    const COUNT = Number(process.env.BENCH_VMS ?? 3);
    global.gc?.();
    const before = rssMiB(d.child.pid!);
    for (let i = 0; i < COUNT; i++) {
      await launch(d, `mem${i}`);
      await state(d, `mem${i}`, 'start');
    }
    for (let i = 0; i < COUNT; i++) await agentReady(d, `mem${i}`, performance.now());
    const after = rssMiB(d.child.pid!);
    const qemuPids = (await Promise.all(Array.from({ length: COUNT }, (_, i) => d.request('GET', `/1.0/instances/mem${i}/state`))))
      .map((r) => r.json?.metadata?.pid as number).filter((pid) => pid > 0);
    const qemuRss = qemuPids.map(rssMiB);
    const perVm = (after - before) / COUNT;
    results.vm_rss = { daemon_before_mib: before, daemon_after_mib: after, per_vm_mib: perVm, qemu_mib: qemuRss };
    rows.push({ scenario: `daemon RSS per running VM (${COUNT} VMs, agents connected)`, value: `${perVm.toFixed(2)} MiB (QEMU itself ${median(qemuRss).toFixed(0)} MiB each)`, target: '< 2 MiB' });
    for (let i = 0; i < COUNT; i++) {
      await state(d, `mem${i}`, 'stop', { force: true });
      await call(d, 'DELETE', `/1.0/instances/mem${i}`);
    }

    // A guest without ACPI never sees the power button: the stop must force it within timeout + 1 s.
    await state(d, 'rt', 'stop', { force: true });
    await call(d, 'PATCH', '/1.0/instances/rt', { config: { 'raw.qemu': '-machine acpi=off' } });
    await state(d, 'rt', 'start');
    const TIMEOUT = 2;
    const stop = await timed(() => state(d, 'rt', 'stop', { timeout: TIMEOUT }));
    results.vm_stop_acpi_ignored_ms = stop;
    rows.push({ scenario: `stop of an ACPI-ignoring guest, timeout ${TIMEOUT} s`, value: `${stop.toFixed(0)} ms`, target: `< ${TIMEOUT * 1000 + 1000} ms` });
    await call(d, 'DELETE', '/1.0/instances/rt');
  } finally {
    await d.stop();
    rmSync(image.dir, { recursive: true, force: true });
    rmSync(d.dir, { recursive: true, force: true });
  }
}
