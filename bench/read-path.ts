/**
 * The read path against its floor (issue 22): for each listed endpoint, at recursion 0 and 1, the
 * same load generator (autocannon, 32 connections) drives corral and then a bare node http server
 * (bench/bare-server.ts, a process of its own) that answers the very bytes corral answered. Per
 * endpoint: requests per second of each and their ratio, and CPU time per request of each process
 * (utime + stime from /proc) and their ratio. With BENCH_READ_LARGE (default 1000) instances more,
 * `GET /1.0/instances?recursion=1` is compared per instance returned. BENCH_READ_SECONDS (default 3)
 * is the length of each run; each endpoint gets BENCH_READ_ROUNDS (default 3) rounds of corral then the
 * bare server, and the medians (of each figure and of the ratios) are printed.
 */
import autocannon from 'autocannon';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startWithPool, type Daemon } from '../test/helpers/daemon.js';
import { buildBusyboxImage } from '../test/helpers/busybox-image.js';
import { importImage } from '../test/helpers/api.js';
import { call, median } from './containers.js';
import { fetchRaw } from './scale.js';

interface Row { scenario: string; value: string; target?: string }

const SECONDS = Number(process.env.BENCH_READ_SECONDS ?? 3);
/** Rounds per endpoint, corral then the bare server in each: the median ratio is printed (one run swings by ~15%). */
const ROUNDS = Math.max(1, Number(process.env.BENCH_READ_ROUNDS ?? 3));
const LARGE = Number(process.env.BENCH_READ_LARGE ?? 1000);
const CONNECTIONS = 32;
const INSTANCES = 10;
/** `/` first: a constant answer, what the HTTP layer and pipeline cost whatever the endpoint. */
const ENDPOINTS = ['/', '/1.0', '/1.0/instances', '/1.0/profiles', '/1.0/networks', '/1.0/images', '/1.0/operations', '/1.0/storage-pools/default/volumes'];
/** Clock ticks per second of /proc/<pid>/stat (USER_HZ, 100 on Linux). */
const TICKS = 100;

/**
 * With two CPUs or more, the server measured (corral, then the bare server) runs on the last one and
 * the load generator (this process) on the first: each server then meets the same conditions, where
 * the scheduler would otherwise move them about (one run's figures drifted by a third midway).
 */
const CPUS = availableParallelism();
function pin(pid: number, cpus: string): void {
  if (CPUS >= 2) spawnSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' });
}
const SERVER_CPU = String(CPUS - 1);

/** CPU seconds a process has used so far. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS;
}

/** The bare server, serving `answers` (URL to body). */
async function startBare(dir: string, answers: Map<string, Buffer>): Promise<{ socket: string; pid: number; stop(): void }> {
  const file = path.join(dir, 'answers.json');
  writeFileSync(file, JSON.stringify(Object.fromEntries([...answers].map(([url, body]) => [url, body.toString('base64')]))));
  const socket = path.join(dir, 'bare.socket');
  const script = path.join(path.dirname(fileURLToPath(import.meta.url)), 'bare-server.js');
  const child = spawn(process.execPath, [script, socket, file], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`the bare server exited (${code})`)));
  });
  pin(child.pid!, SERVER_CPU);
  return { socket, pid: child.pid!, stop: () => child.kill('SIGTERM') };
}

interface Load { rps: number; cpuPerRequestUs: number; requests: number; failures: number }

/** One run of the generator against `socket`, with the CPU time `pid` spent meanwhile. */
async function load(socket: string, pid: number, url: string, seconds = SECONDS): Promise<Load> {
  await autocannon({ url: `http://localhost${url}`, socketPath: socket, connections: CONNECTIONS, duration: 1 });
  const before = cpuSeconds(pid);
  const r = await autocannon({ url: `http://localhost${url}`, socketPath: socket, connections: CONNECTIONS, duration: seconds });
  const cpu = cpuSeconds(pid) - before;
  const requests = r.requests.total;
  return { rps: r.requests.average, cpuPerRequestUs: requests ? (cpu / requests) * 1e6 : NaN, requests, failures: r.errors + r.non2xx + r.timeouts };
}

/** Each figure's median over the rounds (failures summed). */
const medianLoad = (loads: Load[]): Load => ({
  rps: median(loads.map((l) => l.rps)),
  cpuPerRequestUs: median(loads.map((l) => l.cpuPerRequestUs)),
  requests: median(loads.map((l) => l.requests)),
  failures: loads.reduce((sum, l) => sum + l.failures, 0),
});

export async function readPathScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const dir = mkdtempSync(path.join(tmpdir(), 'x5read-'));
  const d: Daemon = await startWithPool({ plugins: 'full', dir });
  const out: Record<string, unknown> = { load: readFileSync('/proc/loadavg', 'utf8').trim(), connections: CONNECTIONS, seconds: SECONDS };
  results.read_path = out;
  let bare: Awaited<ReturnType<typeof startBare>> | undefined;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  pin(d.child.pid!, SERVER_CPU);
  pin(process.pid, `0-${Math.max(0, CPUS - 2)}`);
  try {
    const image = buildBusyboxImage('gzip');
    await importImage(d, image.unified, 'bb');
    rmSync(image.dir, { recursive: true, force: true });
    for (let i = 0; i < INSTANCES; i++) await call(d, 'POST', '/1.0/instances', { name: `x5r${i}`, source: { type: 'image', alias: 'bb' } });

    // Finished operations stay listed for a few seconds: the listing is captured once they went, or
    // corral would serve a shorter listing than the bare server's copy.
    for (const deadline = Date.now() + 15_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 250))) {
      const listed = JSON.parse((await fetchRaw(agent, d.socket, '/1.0/operations')).body.toString()).metadata as Record<string, unknown[]> | null;
      if (!listed || Object.values(listed).every((ops) => ops.length === 0)) break;
    }
    const urls = ENDPOINTS.flatMap((u) => [u, u === '/1.0' || u === '/' ? undefined : `${u}?recursion=1`]).filter((u): u is string => !!u);
    const answers = new Map<string, Buffer>();
    for (const url of urls) {
      const res = await fetchRaw(agent, d.socket, url);
      if (res.status !== 200) throw new Error(`GET ${url}: ${res.status} ${res.body.toString().slice(0, 200)}`);
      answers.set(url, res.body);
    }
    bare = await startBare(dir, answers);
    const figures: Record<string, unknown> = {};
    for (const url of urls) {
      const rounds: { corral: Load; bare: Load }[] = [];
      for (let round = 0; round < ROUNDS; round++) rounds.push({ corral: await load(d.socket, d.child.pid!, url), bare: await load(bare.socket, bare.pid, url) });
      const corral = medianLoad(rounds.map((r) => r.corral));
      const floor = medianLoad(rounds.map((r) => r.bare));
      // The comparison holds only while corral still answers the bytes the bare server serves.
      const same = (await fetchRaw(agent, d.socket, url)).body.equals(answers.get(url)!);
      const cpuRatio = median(rounds.map((r) => r.corral.cpuPerRequestUs / r.bare.cpuPerRequestUs));
      const rpsRatio = median(rounds.map((r) => r.corral.rps / r.bare.rps));
      figures[url] = { corral, bare: floor, cpu_ratio: cpuRatio, rps_ratio: rpsRatio, rounds: rounds.length, bytes: answers.get(url)!.length, same_bytes: same };
      rows.push({
        scenario: `read path ${url} (${INSTANCES} instances), c=${CONNECTIONS}`,
        value: `${corral.rps.toFixed(0)} req/s (${rpsRatio.toFixed(2)} of bare ${floor.rps.toFixed(0)}), ${corral.cpuPerRequestUs.toFixed(0)} us CPU/req (${cpuRatio.toFixed(2)}x bare ${floor.cpuPerRequestUs.toFixed(0)})${corral.failures ? `, ${corral.failures} failures` : ''}${same ? '' : ', ANSWER CHANGED during the run'}`,
        target: 'CPU <= 2x, req/s >= 0.8',
      });
    }
    out.endpoints = figures;
    bare.stop();
    bare = undefined;

    if (LARGE > 0) {
      const names = Array.from({ length: LARGE }, (_, i) => `x5l${i}`);
      let next = 0;
      await Promise.all(Array.from({ length: 16 }, async () => {
        while (next < names.length) await call(d, 'POST', '/1.0/instances', { name: names[next++], source: { type: 'none' } });
      }));
      const url = '/1.0/instances?recursion=1';
      const res = await fetchRaw(agent, d.socket, url);
      const count = (JSON.parse(res.body.toString()).metadata as unknown[]).length;
      bare = await startBare(dir, new Map([[url, res.body]]));
      const corral = await load(d.socket, d.child.pid!, url);
      const floor = await load(bare.socket, bare.pid, url);
      const perInstance = (l: Load) => l.cpuPerRequestUs / count;
      const ratio = perInstance(corral) / perInstance(floor);
      out.large = { instances: count, corral, bare: floor, cpu_per_instance_us: perInstance(corral), bare_cpu_per_instance_us: perInstance(floor), ratio, bytes: res.body.length };
      rows.push({
        scenario: `read path ${url} with ${count} instances, c=${CONNECTIONS}`,
        value: `${perInstance(corral).toFixed(2)} us CPU per instance returned (${ratio.toFixed(2)}x bare ${perInstance(floor).toFixed(2)}); ${corral.rps.toFixed(0)} req/s vs ${floor.rps.toFixed(0)}; ${(res.body.length / 1024).toFixed(0)} KiB`,
        target: 'CPU per instance <= 2x',
      });
    }
  } finally {
    pin(process.pid, `0-${CPUS - 1}`);
    agent.destroy();
    bare?.stop();
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
