/**
 * corral's benchmark, over the real unix socket: request throughput and latency, event fan-out,
 * cold start and idle memory for the `edge` and `full` sets. Prints a table, writes JSON.
 */
import autocannon from 'autocannon';
import http from 'node:http';
import { mkdirSync, writeFileSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { projectRoot, startDaemon, unixWebsocket, type Daemon } from '../test/helpers/daemon.js';
import { containerScenarios } from './containers.js';
import { tlsScenarios } from './tls.js';
import { networkScenarios } from './networks.js';
import { volumeScenarios } from './volumes.js';
import { storageScenarios } from './storage.js';
import { proxyScenarios } from './proxy.js';
import { nicScenarios } from './nics.js';
import { soakScenario } from './soak.js';
import { scaleScenarios } from './scale.js';
import { migrationScenarios } from './migration.js';
import { imageCopyScenarios } from './image-copy.js';
import { referenceMigrationScenarios } from './reference-migration.js';
import { vmScenarios } from './vms.js';
import { clusterScenarios } from './cluster.js';
import { limitsScenarios } from './limits.js';
import { hostHardwareScenarios } from './host-hardware.js';
import { syscallScenarios } from './syscalls.js';
import { syscallMountScenarios } from './syscall-mounts.js';
import { unixDeviceScenarios } from './unix-devices.js';
import { guestSocketScenarios } from './guest-socket.js';
import { layeredVolumeScenarios } from './layered-volumes.js';
import { startupCostScenarios } from './startup-costs.js';
import { startupScenarios } from './startup.js';
import { readPathScenarios } from './read-path.js';

interface Row { scenario: string; value: string; target?: string }
const rows: Row[] = [];
const results: Record<string, unknown> = { date: new Date().toISOString(), node: process.version };

const DURATION = Number(process.env.BENCH_SECONDS ?? 8);
const EVENTS = Number(process.env.BENCH_EVENTS ?? 10000);

const rssMiB = (pid: number) => {
  const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  return kb / 1024;
};

const percentile = (sorted: number[], p: number) => sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : NaN;

async function throughput(d: Daemon, url: string, connections: number): Promise<void> {
  await autocannon({ url: `http://localhost${url}`, socketPath: d.socket, connections, duration: 1 });
  const r = await autocannon({ url: `http://localhost${url}`, socketPath: d.socket, connections, duration: DURATION });
  const key = `${url}_c${connections}`;
  results[key] = { rps: r.requests.average, p50_ms: r.latency.p50, p99_ms: r.latency.p99, errors: r.errors, non2xx: r.non2xx };
  const target = url === '/1.0' && connections === 32 ? '>= 7000 req/s, p99 < 10 ms' : undefined;
  rows.push({ scenario: `GET ${url} c=${connections}`, value: `${r.requests.average.toFixed(0)} req/s, p50 ${r.latency.p50} ms, p99 ${r.latency.p99} ms${r.non2xx || r.errors ? `, ${r.non2xx + r.errors} failures` : ''}`, target });
}

/** Sequential PATCH /1.0 requests, each causing one lifecycle event; latency from the response to each listener's receipt. */
async function fanout(d: Daemon, listeners: number): Promise<void> {
  const received: number[][] = [];
  const sockets = await Promise.all(Array.from({ length: listeners }, () => unixWebsocket(d.socket, '/1.0/events?type=lifecycle')));
  sockets.forEach((ws, i) => {
    received[i] = [];
    ws.on('message', () => received[i]!.push(performance.now()));
  });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const responded: number[] = [];
  const sent: number[] = [];
  for (let i = 0; i < EVENTS; i++) {
    sent.push(performance.now());
    await new Promise<void>((resolve, reject) => {
      const body = `{"config":{"user.bench":"${i}"}}`;
      const req = http.request({ socketPath: d.socket, agent, method: 'PATCH', path: '/1.0', headers: { 'content-type': 'application/json', 'content-length': body.length } }, (res) => {
        res.resume();
        res.on('end', () => {
          responded.push(performance.now());
          resolve();
        });
      });
      req.on('error', reject);
      req.end(body);
    });
  }
  await new Promise((r) => setTimeout(r, 500));
  // After the response (the issue's measure; an event that beats the response counts 0), and from the request's start.
  const latencies: number[] = [];
  const fromSend: number[] = [];
  let lost = 0;
  for (const times of received) {
    lost += Math.max(0, EVENTS - times.length);
    times.forEach((t, i) => {
      latencies.push(Math.max(0, t - responded[i]!));
      fromSend.push(t - sent[i]!);
    });
  }
  latencies.sort((a, b) => a - b);
  fromSend.sort((a, b) => a - b);
  for (const ws of sockets) ws.close();
  agent.destroy();
  const p50 = percentile(latencies, 50);
  const p99 = percentile(latencies, 99);
  const sendP50 = percentile(fromSend, 50);
  const sendP99 = percentile(fromSend, 99);
  results[`events_${listeners}`] = { p50_ms: p50, p99_ms: p99, from_request_p50_ms: sendP50, from_request_p99_ms: sendP99, lost, events: EVENTS, listeners };
  rows.push({ scenario: `event delivery after response, ${listeners} listener(s), ${EVENTS} events`, value: `p50 ${p50.toFixed(3)} ms, p99 ${p99.toFixed(3)} ms, lost ${lost}`, target: listeners === 50 ? 'p99 < 1.5 ms, 0 lost' : undefined });
  rows.push({ scenario: `  same, measured from the request's start`, value: `p50 ${sendP50.toFixed(3)} ms, p99 ${sendP99.toFixed(3)} ms` });
}

/**
 * `npm run bench -- tls startup` runs only those groups (startup, startup-costs, api, read-path, tls, containers, networks, volumes, storage,
 * proxy, nics, migration, image-copy, migration-reference, vms, cluster, limits, host-hardware, syscalls, unix-devices, guest-socket);
 * no argument runs them all. `soak` (minutes of steady load, BENCH_SOAK_MINUTES) and `scale`
 * (10,000 instances, BENCH_SCALE_SIZES / BENCH_SCALE_RUNNING) run only when named.
 */
const only = new Set(process.argv.slice(2));
const want = (group: string) => only.size === 0 || only.has(group);

if (want('startup-costs')) await startupCostScenarios(rows, results);
if (want('startup')) await startupScenarios(rows, results);
if (want('api')) {
  const d = await startDaemon({ plugins: 'full' });
  for (const url of ['/1.0', '/1.0/operations']) for (const c of [1, 32]) await throughput(d, url, c);
  await fanout(d, 1);
  await fanout(d, 50);
  results.rss_after_load_full_mib = rssMiB(d.child.pid!);
  rows.push({ scenario: 'RSS after the load above (full)', value: `${(results.rss_after_load_full_mib as number).toFixed(1)} MiB` });
  await d.stop();
}
if (want('read-path')) await readPathScenarios(rows, results);
if (want('tls')) await tlsScenarios(rows, results);
if (want('containers') && process.env.BENCH_CONTAINERS !== '0') await containerScenarios(rows, results);
if (want('networks')) await networkScenarios(rows, results);
if (want('volumes')) await volumeScenarios(rows, results);
if (want('storage')) await storageScenarios(rows, results);
if (want('proxy')) await proxyScenarios(rows, results);
if (want('nics')) await nicScenarios(rows, results);
if (want('migration')) await migrationScenarios(rows, results);
if (want('image-copy')) await imageCopyScenarios(rows, results);
if (want('migration-reference')) await referenceMigrationScenarios(rows, results);
if (want('vms')) await vmScenarios(rows, results);
if (want('cluster')) await clusterScenarios(rows, results);
if (want('limits')) await limitsScenarios(rows, results);
if (want('host-hardware')) await hostHardwareScenarios(rows, results);
if (want('syscalls')) await syscallScenarios(rows, results);
if (want('syscalls')) await syscallMountScenarios(rows, results);
if (want('unix-devices')) await unixDeviceScenarios(rows, results);
if (want('guest-socket')) await guestSocketScenarios(rows, results);
if (want('layered')) await layeredVolumeScenarios(rows, results);
if (only.has('soak')) await soakScenario(rows, results);
if (only.has('scale')) await scaleScenarios(rows, results);

const width = Math.max(...rows.map((r) => r.scenario.length));
const valueWidth = Math.max(...rows.map((r) => r.value.length));
console.log(`${'scenario'.padEnd(width)}  ${'result'.padEnd(valueWidth)}  target`);
for (const r of rows) console.log(`${r.scenario.padEnd(width)}  ${r.value.padEnd(valueWidth)}  ${r.target ?? ''}`);
const out = path.join(projectRoot, 'bench', 'results');
mkdirSync(out, { recursive: true });
// A partial run (group arguments) writes its own file and leaves the full run's figures alone.
const file = only.size ? `partial-${[...only].sort().join('-')}.json` : 'latest.json';
writeFileSync(path.join(out, file), JSON.stringify(results, null, 2));
console.log(`\nwritten: bench/results/${file}`);
