/**
 * `lxc image copy r1:<image> r2:` of an image holding 100 MB of random bytes between two corral
 * daemons over HTTPS on loopback, against `curl` fetching the same export from the same listener
 * with a trusted client certificate, alternated run by run. The same pull asked of the target
 * through the API (no client) says how much of the time is the client's.
 * Group `image-copy` (`npm run bench -- image-copy`).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { startWithPool, stopDaemons, type Daemon } from '../test/helpers/daemon.js';
import { importImage } from '../test/helpers/api.js';
import { buildLargeImage } from '../test/helpers/large-image.js';
import { selfSigned } from '../test/helpers/pki.js';
import { call, median, type Row } from './containers.js';
import { metered, medianCpu, type CpuTime } from './cpu.js';
import { RemoteClient } from '../test/helpers/remotes.js';

const RUNS = Number(process.env.BENCH_IMAGE_COPY_RUNS ?? 5);
const MEGABYTES = Number(process.env.BENCH_IMAGE_COPY_MB ?? 100);

/** `curl` writing the export to a file on the same filesystem the daemons use; its time. */
function curlExport(address: string, fp: string, cert: { certFile: string; keyFile: string }, scratch: string): number {
  const out = path.join(scratch, 'export');
  const t0 = performance.now();
  execFileSync('curl', ['-sS', '--fail', '-k', '--cert', cert.certFile, '--key', cert.keyFile, '-o', out, `https://${address}/1.0/images/${fp}/export`]);
  const ms = performance.now() - t0;
  rmSync(out, { force: true });
  return ms;
}

/** What `lxc image copy` asks of the two daemons without the client: a one-time secret, then the target's pull. */
async function apiPull(source: Daemon, url: string, target: Daemon, fp: string): Promise<number> {
  const t0 = performance.now();
  const token = await source.request('POST', `/1.0/images/${fp}/secret`);
  if (token.status !== 202) throw new Error(`image secret: ${token.body}`);
  await call(target, 'POST', '/1.0/images', {
    source: {
      type: 'image', mode: 'pull', server: url, protocol: 'lxd', fingerprint: fp,
      certificate: readFileSync(path.join(source.dir, 'server.crt'), 'utf8'), secret: token.json.metadata.metadata.secret,
    },
  });
  return performance.now() - t0;
}

export async function imageCopyScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const image = buildLargeImage(MEGABYTES);
  const scratch = mkdtempSync(path.join(tmpdir(), 'corral-bench-image-copy-'));
  const remotes = new RemoteClient('bench-remotes-17', 300_000);
  const source = await startWithPool({ plugins: 'full' });
  const target = await startWithPool({ plugins: 'full' });
  try {
    const fp = await importImage(source, image.file, 'big');
    const url = await remotes.add('r1', source, '127.0.18.3');
    await remotes.add('r2', target, '127.0.18.4');
    const client = selfSigned(scratch, 'bench-curl');
    await call(source, 'POST', '/1.0/certificates', { type: 'client', name: 'bench-curl', certificate: client.base64 });
    const address = remotes.addresses.get('r1')!;
    const drop = () => call(target, 'DELETE', `/1.0/images/${fp}`);

    const times = { lxc: [] as number[], curl: [] as number[], api: [] as number[] };
    const cpu = { lxc: [] as Record<string, CpuTime>[], curl: [] as Record<string, CpuTime>[] };
    const parties = { bench: 'self' as const, source: source.child.pid!, target: target.child.pid! };
    // Run 0 warms the listeners and the page cache; it is not counted.
    for (let i = 0; i <= RUNS; i++) {
      const keep = i > 0;
      const sample = {
        curl: await metered(parties, () => curlExport(address, fp, client, scratch), keep ? cpu.curl : undefined),
        lxc: await metered(parties, () => remotes.must('image', 'copy', `r1:${fp}`, 'r2:').then((r) => r.ms), keep ? cpu.lxc : undefined),
        api: await drop().then(() => apiPull(source, url, target, fp)),
      };
      await drop();
      if (keep) for (const [k, v] of Object.entries(sample)) times[k as keyof typeof times].push(v);
    }
    const m = Object.fromEntries(Object.entries(times).map(([k, v]) => [k, median(v)])) as Record<keyof typeof times, number>;
    const c = Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, medianCpu(v, median)])) as Record<keyof typeof cpu, Record<string, CpuTime>>;
    const ratio = m.lxc / m.curl;
    const mb = image.size / 1e6;
    results.image_copy_ms = { ...m, lxc_to_curl_ratio: ratio, bytes: image.size, runs: RUNS, samples: times, cpu_ms: c };
    rows.push({
      scenario: `lxc image copy corral -> corral, ${mb.toFixed(0)} MB image (median of ${RUNS})`,
      value: `${m.lxc.toFixed(0)} ms (curl of the export ${m.curl.toFixed(0)} ms, ${ratio.toFixed(2)}x)${ratio <= 1.5 ? '' : ' MISSED'}`,
      target: '<= 1.5x curl',
    });
    rows.push({ scenario: '  same pull through the API, no client', value: `${m.api.toFixed(0)} ms (${(mb / (m.api / 1000)).toFixed(0)} MB/s; curl ${(mb / (m.curl / 1000)).toFixed(0)} MB/s)` });
    rows.push({
      scenario: '  CPU ms per copy (median)',
      value: `lxc image copy: client ${c.lxc.bench!.children.toFixed(0)}, source daemon ${c.lxc.source!.self.toFixed(0)}, target daemon ${c.lxc.target!.self.toFixed(0)} + children ${c.lxc.target!.children.toFixed(0)}; `
        + `curl: curl ${c.curl.bench!.children.toFixed(0)}, source daemon ${c.curl.source!.self.toFixed(0)}`,
    });
  } finally {
    await stopDaemons();
    remotes.remove();
    rmSync(scratch, { recursive: true, force: true });
    rmSync(image.dir, { recursive: true, force: true });
  }
}
