/**
 * Remote API throughput: GET /1.0 over the HTTPS listener with a trusted client certificate and
 * keep-alive, against GET /1.0 over the unix socket of the same daemon in the same run.
 */
import autocannon from 'autocannon';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startDaemon } from '../test/helpers/daemon.js';
import { selfSigned } from '../test/helpers/pki.js';
import { freePort } from '../test/helpers/tls-client.js';

interface Row { scenario: string; value: string; target?: string }

const DURATION = Number(process.env.BENCH_SECONDS ?? 8);

/** User and system CPU time of a process so far, in milliseconds. */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}
const CONNECTIONS = 32;

export async function tlsScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const certDir = mkdtempSync(path.join(tmpdir(), 'corral-bench-certs-'));
  const d = await startDaemon({ plugins: 'full' });
  try {
    const client = selfSigned(certDir, 'bench');
    const port = await freePort();
    const set = await d.request('PATCH', '/1.0', { config: { 'core.https_address': `127.0.0.1:${port}` } });
    const add = await d.request('POST', '/1.0/certificates', { type: 'client', name: 'bench', certificate: client.base64 });
    if (set.status !== 200 || add.status !== 200) throw new Error(`TLS bench setup failed: ${set.body} ${add.body}`);

    const unix = { url: 'http://localhost/1.0', socketPath: d.socket, connections: CONNECTIONS };
    const tls = { url: `https://127.0.0.1:${port}/1.0`, connections: CONNECTIONS, tlsOptions: { cert: client.cert, key: client.key } };
    // Warm both paths, then alternate short rounds so a change in the machine's load hits both alike.
    await autocannon({ ...unix, duration: 1 });
    await autocannon({ ...tls, duration: 1 });
    const rounds = 4;
    const sum = { unix: { requests: 0, seconds: 0, cpu: 0 }, tls: { requests: 0, seconds: 0, cpu: 0, failures: 0 } };
    const latency = { unix: [] as number[], tls: [] as number[] };
    for (let i = 0; i < rounds; i++) {
      for (const kind of ['unix', 'tls'] as const) {
        const cpu0 = cpuMs(d.child.pid!);
        const r = await autocannon({ ...(kind === 'unix' ? unix : tls), duration: DURATION / rounds });
        sum[kind].cpu += cpuMs(d.child.pid!) - cpu0;
        sum[kind].requests += r.requests.total;
        sum[kind].seconds += r.duration;
        latency[kind].push(r.latency.p99);
        if (kind === 'tls') sum.tls.failures += r.non2xx + r.errors;
      }
    }
    const rate = (k: 'unix' | 'tls') => sum[k].requests / sum[k].seconds;
    const cpuPerRequest = (k: 'unix' | 'tls') => (sum[k].cpu * 1000) / sum[k].requests;
    const ratio = rate('tls') / rate('unix');
    const p99 = (k: 'unix' | 'tls') => Math.max(...latency[k]);
    results.tls_get_1_0_c32 = {
      rps: rate('tls'), unix_rps: rate('unix'), ratio_to_unix: ratio, p99_ms: p99('tls'), unix_p99_ms: p99('unix'),
      failures: sum.tls.failures, daemon_cpu_us_per_request: cpuPerRequest('tls'), unix_daemon_cpu_us_per_request: cpuPerRequest('unix'),
    };
    rows.push({
      scenario: `GET /1.0 c=${CONNECTIONS} over the unix socket (TLS baseline)`,
      value: `${rate('unix').toFixed(0)} req/s, p99 ${p99('unix')} ms, daemon CPU ${cpuPerRequest('unix').toFixed(0)} us/req`,
    });
    rows.push({
      scenario: `GET /1.0 c=${CONNECTIONS} over TLS, trusted client certificate, keep-alive`,
      value: `${rate('tls').toFixed(0)} req/s (${(ratio * 100).toFixed(0)}% of unix), p99 ${p99('tls')} ms, daemon CPU ${cpuPerRequest('tls').toFixed(0)} us/req${sum.tls.failures ? `, ${sum.tls.failures} failures` : ''}`,
      target: '>= 70% of unix',
    });
  } finally {
    await d.stop();
    rmSync(certDir, { recursive: true, force: true });
  }
}
