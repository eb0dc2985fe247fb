/**
 * Syscall scenarios: a container start with a syscall deny list against the same start with no
 * syscall policy at all (alternating rounds on one daemon), and the cost of an intercepted mknod
 * inside an unprivileged container (a busybox loop of mknods, against the same loop of mkfifo, which
 * is not intercepted, to show the interception's own share).
 */
import { startWithPool } from '../test/helpers/daemon.js';
import { buildBusyboxImage } from '../test/helpers/busybox-image.js';
import { importImage } from '../test/helpers/api.js';
import { lxc } from '../test/helpers/clients.js';
import { call, median, timed, type Row } from './containers.js';

const RUNS = Number(process.env.BENCH_SYSCALL_RUNS ?? 20);
const MKNODS = 200;

export async function syscallScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const image = buildBusyboxImage('gzip');
  const d = await startWithPool();
  try {
    await importImage(d, image.unified, 'bb');
    await call(d, 'POST', '/1.0/instances', { name: 'plain', source: { type: 'image', alias: 'bb' }, config: { 'security.syscalls.deny_default': 'false' } });
    await call(d, 'POST', '/1.0/instances', { name: 'denying', source: { type: 'image', alias: 'bb' }, config: { 'security.syscalls.deny': 'mkdir\nchroot\nsethostname\nswapon' } });
    const plain: number[] = [];
    const denying: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      for (const [name, times] of [['plain', plain], ['denying', denying]] as const) {
        times.push(await timed(() => call(d, 'PUT', `/1.0/instances/${name}/state`, { action: 'start' })));
        await call(d, 'PUT', `/1.0/instances/${name}/state`, { action: 'stop', force: true });
      }
    }
    const p = median(plain);
    const n = median(denying);
    results.start_with_syscall_deny_list_ms = { with_deny_list: n, without_policy: p, ratio: n / p, runs: RUNS };
    rows.push({
      scenario: `container start with a syscall deny list (median of ${RUNS})`,
      value: `${n.toFixed(1)} ms (no syscall policy ${p.toFixed(1)} ms, ${(n / p).toFixed(2)}x)`,
      target: 'within 1.2x of the start without it',
    });

    await call(d, 'POST', '/1.0/instances', { name: 'mknod', source: { type: 'image', alias: 'bb' }, config: { 'security.syscalls.intercept.mknod': 'true' } });
    await call(d, 'PUT', '/1.0/instances/mknod/state', { action: 'start' });
    const loop = (cmd: string, dir: string) => `mkdir -p ${dir} && cd ${dir} && i=0; while [ $i -lt ${MKNODS} ]; do ${cmd} n$i || exit 1; i=$((i+1)); done`;
    const run = async (script: string) => {
      const res = await lxc(d.socket, 'exec', 'mknod', '--', 'sh', '-c', script);
      if (res.status !== 0) throw new Error(`the loop failed: ${res.stderr}`);
    };
    const mknod: number[] = [];
    const fifo: number[] = [];
    for (let i = 0; i < 3; i++) {
      mknod.push(await timed(() => run(loop('mknod', `/tmp/m${i}`).replace(/mknod n\$i/, 'mknod n$i c 1 3'))));
      fifo.push(await timed(() => run(loop('mkfifo', `/tmp/f${i}`))));
    }
    const perCall = median(mknod) / MKNODS;
    const overhead = (median(mknod) - median(fifo)) / MKNODS;
    results.intercepted_mknod_ms = { per_call: perCall, interception_share: overhead, calls: MKNODS };
    rows.push({
      scenario: `intercepted mknod inside an unprivileged container (busybox loop of ${MKNODS}, median of 3)`,
      value: `${perCall.toFixed(2)} ms a call, process start included (${overhead.toFixed(2)} ms more than an mkfifo)`,
      target: 'under 5 ms each',
    });
    await call(d, 'PUT', '/1.0/instances/mknod/state', { action: 'stop', force: true });
    for (const name of ['plain', 'denying', 'mknod']) await call(d, 'DELETE', `/1.0/instances/${name}`);
  } finally {
    await d.stop();
  }
}
