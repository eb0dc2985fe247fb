/**
 * Proxy device throughput: TCP over loopback from the host into a container through a `proxy`
 * device, against a direct socat relay on the host measured in the same run (alternating rounds).
 * The client is socat reading /dev/zero; the sinks are socat writing to /dev/null, one on the
 * host (for the relay) and one in the container's network namespace (for the device).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { startWithPool } from '../test/helpers/daemon.js';
import { buildBusyboxImage } from '../test/helpers/busybox-image.js';
import { importImage } from '../test/helpers/api.js';
import { call, create, median, type Row } from './containers.js';

const BYTES = Number(process.env.BENCH_PROXY_MB ?? 2048) * 1024 * 1024;
const ROUNDS = Number(process.env.BENCH_PROXY_ROUNDS ?? 3);

function run(cmd: string, args: string[]): ChildProcess {
  return spawn(cmd, args, { stdio: ['ignore', 'ignore', 'inherit'] });
}

const exited = (p: ChildProcess) => new Promise<number>((resolve) => p.once('exit', (code) => resolve(code ?? -1)));

/** Send BYTES to the port and answer MB/s (the clock stops when the sender has written everything and closed). */
async function send(port: number): Promise<number> {
  const t0 = performance.now();
  const p = spawn('sh', ['-c', `head -c ${BYTES} /dev/zero | socat -u -b 131072 STDIN TCP:127.0.0.1:${port}`], { stdio: ['ignore', 'ignore', 'inherit'] });
  const code = await exited(p);
  if (code !== 0) throw new Error(`the bench client failed (${code})`);
  return BYTES / 1e6 / ((performance.now() - t0) / 1000);
}

export async function proxyScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const image = buildBusyboxImage('gzip');
  const d = await startWithPool();
  const helpers: ChildProcess[] = [];
  try {
    await importImage(d, image.unified, 'bb');
    await create(d, 'proxybench');
    await call(d, 'PUT', '/1.0/instances/proxybench/state', { action: 'start' });
    const pid = (await d.request('GET', '/1.0/instances/proxybench/state')).json.metadata.pid as number;
    const base = 41000 + Math.floor(Math.random() * 1000);
    const [hostSink, relay, device, inner] = [base, base + 1, base + 2, 9000];
    helpers.push(run('socat', ['-u', '-b', '131072', `TCP-LISTEN:${hostSink},bind=127.0.0.1,fork,reuseaddr`, 'OPEN:/dev/null']));
    helpers.push(run('nsenter', ['-t', String(pid), '-n', 'socat', '-u', '-b', '131072', `TCP-LISTEN:${inner},bind=127.0.0.1,fork,reuseaddr`, 'OPEN:/dev/null']));
    helpers.push(run('socat', [`TCP-LISTEN:${relay},bind=127.0.0.1,fork,reuseaddr`, `TCP:127.0.0.1:${hostSink}`]));
    await call(d, 'PATCH', '/1.0/instances/proxybench', { devices: { bench: { type: 'proxy', listen: `tcp:127.0.0.1:${device}`, connect: `tcp:127.0.0.1:${inner}` } } });
    await new Promise((r) => setTimeout(r, 300));
    const socat: number[] = [];
    const proxy: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      socat.push(await send(relay));
      proxy.push(await send(device));
    }
    const s = median(socat);
    const p = median(proxy);
    results.proxy_tcp_throughput = { device_mb_s: p, socat_relay_mb_s: s, ratio: p / s, bytes: BYTES, rounds: ROUNDS };
    rows.push({
      scenario: `proxy device TCP-TCP over loopback (${BYTES / 1024 / 1024} MiB, median of ${ROUNDS})`,
      value: `${p.toFixed(0)} MB/s (direct socat relay ${s.toFixed(0)} MB/s, ${((p / s) * 100).toFixed(0)}%)`,
      target: '>= 80% of the socat relay',
    });
    await call(d, 'PUT', '/1.0/instances/proxybench/state', { action: 'stop', force: true });
    await call(d, 'DELETE', '/1.0/instances/proxybench');
  } finally {
    for (const h of helpers) h.kill('SIGKILL');
    await d.stop();
  }
}
