/**
 * Soak: a steady mixed load against a daemon with a few running busybox containers, to show that
 * nothing is kept per request. 16 clients (keep-alive, over the unix socket) read instance state and
 * lists, PATCH user.* keys, exec over websockets and with recorded output, wait on operations and
 * open and drop event listeners, while the daemon's RSS, V8 heap, open fds, operations and child
 * processes are sampled. Opt-in only (`npm run bench -- soak`): it runs for BENCH_SOAK_MINUTES (10).
 *
 * Memory is judged after a warm-up (caches filled, code optimised): every later RSS sample must stay
 * within 10% of the warm-up figure. The heap is read through the inspector, which the daemon is
 * started with on loopback; BENCH_SOAK_HEAPSNAPSHOTS=1 also writes heap snapshots after the warm-up
 * and at the end of the load, to compare in DevTools (Memory tab, "Comparison").
 */
import http from 'node:http';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import WebSocket from 'ws';
import { projectRoot, startWithPool, type Daemon } from '../test/helpers/daemon.js';
import { buildBusyboxImage } from '../test/helpers/busybox-image.js';
import { importImage } from '../test/helpers/api.js';
import { Inspector } from '../test/helpers/inspector.js';
import type { ProbeJob, ProbeResult } from './soak-probe.js';

interface Row { scenario: string; value: string; target?: string }

const MINUTES = Number(process.env.BENCH_SOAK_MINUTES ?? 10);
const CLIENTS = Number(process.env.BENCH_SOAK_CLIENTS ?? 16);
const INSTANCES = Number(process.env.BENCH_SOAK_INSTANCES ?? 3);
const SAMPLE_MS = Number(process.env.BENCH_SOAK_SAMPLE_SECONDS ?? 5) * 1000;
/** Long enough for V8 to optimise and for every pool and cache to reach its working size. */
const WARMUP_MS = Number(process.env.BENCH_SOAK_WARMUP_SECONDS ?? Math.min(90, MINUTES * 12)) * 1000;
/** After the load: finished operations are kept a few seconds, then go. */
const SETTLE_MS = Number(process.env.BENCH_SOAK_SETTLE_SECONDS ?? 20) * 1000;
const SNAPSHOTS = process.env.BENCH_SOAK_HEAPSNAPSHOTS === '1';
/** BENCH_SOAK_CPU_PROF=<file>: a V8 CPU profile of the daemon from the end of the warm-up to the end of the load. */
const CPU_PROFILE = process.env.BENCH_SOAK_CPU_PROF;
/** BENCH_SOAK_NODE_ARGS: node or V8 flags added after package.json's (to compare heap settings under the same load). */
const EXTRA_NODE_ARGS = (process.env.BENCH_SOAK_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
/** No single request or exec of the load may take longer than this; one that does counts as a failure. */
const STEP_TIMEOUT_MS = 60_000;
const TOLERANCE = 1.1;

/** Weights of the mixed load (the issue's: state, list, PATCH, exec). */
const MIX: [Action, number][] = [
  ['state', 6], ['list1', 2], ['list2', 1], ['patch', 3], ['exec-ws', 2], ['exec-record', 1], ['exec-wait', 1], ['operations', 1], ['events', 1],
  ['wait-abandoned', 1],
];
type Action = 'state' | 'list1' | 'list2' | 'patch' | 'exec-ws' | 'exec-record' | 'exec-wait' | 'operations' | 'events' | 'wait-abandoned';

interface Sample { t: number; rss: number; heap: number; external: number; fds: number; operations: number; children: number; running?: string[] }

const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
const openFds = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Every process below `pid` (lxc-attach and what it started; the containers' own monitors are not the daemon's children). */
function descendants(pid: number): number {
  const parents = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const ppid = Number(readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
      parents.set(ppid, [...(parents.get(ppid) ?? []), Number(entry)]);
    } catch { /* gone meanwhile */ }
  }
  let count = 0;
  const queue = [pid];
  while (queue.length) for (const child of parents.get(queue.shift()!) ?? []) { count++; queue.push(child); }
  return count;
}

interface Answer { status: number; json: any; body: string }

/** One client's connection: keep-alive as real clients use it, every request bounded in time. */
class Client {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  constructor(private readonly socket: string) {}

  request(method: string, url: string, body?: unknown): Promise<Answer> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = http.request({ socketPath: this.socket, agent: this.agent, method, path: url, headers: payload ? { 'content-type': 'application/json' } : {} }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: unknown;
          try { json = JSON.parse(text); } catch { /* a log file */ }
          resolve({ status: res.statusCode ?? 0, json, body: text });
        });
        res.on('error', reject);
      });
      req.setTimeout(STEP_TIMEOUT_MS, () => req.destroy(new Error(`${method} ${url} timed out`)));
      req.on('error', reject);
      req.end(payload);
    });
  }

  /** A request that may answer with an operation (200 sync or 202 then a wait): the operation's outcome. */
  async settle(method: string, url: string, body?: unknown): Promise<any> {
    const res = await this.request(method, url, body);
    if (res.status >= 400) throw new Error(res.json?.error ?? `status ${res.status}`);
    if (res.json?.type !== 'async') return res.json?.metadata;
    return this.wait(res.json.operation);
  }

  async wait(operation: string): Promise<any> {
    const op = await this.request('GET', `${operation}/wait?timeout=${STEP_TIMEOUT_MS / 1000}`);
    const meta = op.json?.metadata;
    if (meta?.status !== 'Success') throw new Error(meta?.err || `operation ${meta?.status ?? op.status}`);
    return meta;
  }

  /** A wait whose client gives up before the operation ends (its own timeout, a ^C). */
  abandonWait(operation: string, afterMs: number): Promise<void> {
    return new Promise((resolve) => {
      const req = http.request({ socketPath: this.socket, agent: false, method: 'GET', path: `${operation}/wait` });
      req.on('error', () => resolve());
      req.on('response', () => resolve());
      req.end();
      setTimeout(() => {
        req.destroy();
        resolve();
      }, afterMs);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

function websocket(socket: string, url: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws+unix://${socket}:${url}`);
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
  });
}

/** Resolves when the socket closes, or terminates it after `ms`. */
function closed(ws: WebSocket, ms: number): Promise<boolean> {
  if (ws.readyState === ws.CLOSED) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      ws.terminate();
      resolve(false);
    }, ms);
    ws.once('close', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/** `lxc exec` without a terminal: stdin, stdout, stderr and control sockets; the command reads 5 bytes and answers on both outputs. */
async function execWithSockets(client: Client, socket: string, instance: string): Promise<void> {
  const res = await client.request('POST', `/1.0/instances/${instance}/exec`, {
    command: ['sh', '-c', 'head -c 5; echo; echo err >&2'], 'wait-for-websocket': true, interactive: false, environment: {},
  });
  if (res.status !== 202) throw new Error(res.json?.error ?? `status ${res.status}`);
  const op = res.json.operation as string;
  const fds = res.json.metadata.metadata.fds as Record<string, string>;
  const open = (name: string) => websocket(socket, `${op}/websocket?secret=${fds[name]}`);
  const sockets = await Promise.all(['0', '1', '2', 'control'].map(open));
  try {
    const [stdin, stdout, stderr] = sockets as [WebSocket, WebSocket, WebSocket, WebSocket];
    let out = '';
    stdout.on('message', (data) => (out += String(data)));
    stdin.send(Buffer.from('hello'));
    const ended = await Promise.all([closed(stdout, STEP_TIMEOUT_MS), closed(stderr, STEP_TIMEOUT_MS)]);
    if (!ended.every(Boolean)) throw new Error('exec output did not end');
    const meta = await client.wait(op);
    if (meta.metadata?.return !== 0 || out !== 'hello\n') throw new Error(`exec answered ${meta.metadata?.return} ${JSON.stringify(out)}`);
  } finally {
    for (const ws of sockets) if (ws.readyState !== ws.CLOSED) ws.close();
  }
}

async function execRecorded(client: Client, instance: string): Promise<void> {
  const meta = await client.settle('POST', `/1.0/instances/${instance}/exec`, { command: ['echo', 'recorded'], 'record-output': true, 'wait-for-websocket': false });
  const output = meta.metadata.output as Record<string, string>;
  const read = await client.request('GET', output['1']!);
  if (read.body !== 'recorded\n') throw new Error(`recorded output was ${JSON.stringify(read.body)}`);
  // A tidy client deletes the records it read (lxc file-like clients do; nothing else ever would).
  for (const url of Object.values(output)) await client.request('DELETE', url);
}

/** One client: a fixed sequence through the mix, so every run does the same work. */
async function runClient(index: number, socket: string, instances: string[], token: string, until: () => boolean, tally: Map<string, { ok: number; failed: number; errors: Map<string, number> }>): Promise<void> {
  const client = new Client(socket);
  const deck = MIX.flatMap(([action, weight]) => Array<Action>(weight).fill(action));
  let listener: { ws: WebSocket; left: number } | undefined;
  let step = index; // clients start at different points of the deck
  try {
    while (!until()) {
      const action = deck[step % deck.length]!;
      const instance = instances[step % instances.length]!;
      step++;
      const record = tally.get(action) ?? { ok: 0, failed: 0, errors: new Map() };
      tally.set(action, record);
      try {
        switch (action) {
          case 'state': await client.settle('GET', `/1.0/instances/${instance}/state`); break;
          case 'list1': await client.settle('GET', '/1.0/instances?recursion=1'); break;
          case 'list2': await client.settle('GET', '/1.0/instances?recursion=2'); break;
          case 'patch': await client.settle('PATCH', `/1.0/instances/${instance}`, { config: { [`user.soak${index}`]: String(step) } }); break;
          case 'exec-ws': await execWithSockets(client, socket, instance); break;
          case 'exec-record': await execRecorded(client, instance); break;
          case 'exec-wait': {
            const res = await client.request('POST', `/1.0/instances/${instance}/exec`, { command: ['true'], 'wait-for-websocket': false });
            if (res.status !== 202) throw new Error(res.json?.error ?? `status ${res.status}`);
            await client.wait(res.json.operation);
            break;
          }
          case 'operations': await client.settle('GET', '/1.0/operations?recursion=1'); break;
          case 'wait-abandoned': await client.abandonWait(token, 50); break;
          case 'events': {
            // A listener that stays for a few of this client's next steps; half leave cleanly, half just drop.
            if (!listener) listener = { ws: await websocket(socket, step % 2 ? '/1.0/events' : '/1.0/events?type=operation,lifecycle'), left: 3 + (step % 5) };
            break;
          }
        }
        record.ok++;
      } catch (err) {
        record.failed++;
        const message = err instanceof Error ? err.message : String(err);
        record.errors.set(message, (record.errors.get(message) ?? 0) + 1);
      }
      if (listener && --listener.left <= 0) {
        if (step % 2) listener.ws.close();
        else listener.ws.terminate();
        listener = undefined;
      }
    }
  } finally {
    listener?.ws.close();
    client.close();
  }
}

async function sample(d: Daemon, inspector: Inspector, t0: number, withNames = false): Promise<Sample> {
  const pid = d.child.pid!;
  const ops = await d.request('GET', '/1.0/operations?recursion=1');
  // The token operation runs all along; it is not the load's.
  const running = ((ops.json?.metadata?.running ?? []) as { class: string; description: string }[]).filter((op) => op.class !== 'token');
  const memory = await inspector.memoryUsage();
  return { t: (Date.now() - t0) / 1000, rss: rssMiB(pid), heap: memory.heapUsed, external: memory.external, fds: openFds(pid), operations: running.length, children: descendants(pid), ...(withNames ? { running: running.map((op) => op.description) } : {}) };
}

/**
 * A light client beside the load asking `GET /1.0` every PROBE_MS, in a thread of its own
 * (soak-probe.ts): what an operator's poll waits while the daemon is busy (the issue's p99 < 5 ms).
 * Only answers after the warm-up are counted.
 */
const PROBE_MS = 20;
function probeLatency(socket: string, stopAt: number, countFrom: number): Promise<ProbeResult> {
  const job: ProbeJob = { socket, stopAt, countFrom, everyMs: PROBE_MS, timeoutMs: STEP_TIMEOUT_MS };
  const worker = new Worker(new URL('./soak-probe.js', import.meta.url), { workerData: job });
  return new Promise((resolve, reject) => {
    worker.once('message', (result: ProbeResult) => resolve(result));
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the probe thread ended (${code}) without its figures`)));
  });
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? NaN;

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** Least-squares slope of `y` over time, per minute. */
function slopePerMinute(samples: Sample[], y: (s: Sample) => number): number {
  const xs = samples.map((s) => s.t / 60);
  const ys = samples.map(y);
  const mx = mean(xs);
  const my = mean(ys);
  const num = xs.reduce((a, x, i) => a + (x - mx) * (ys[i]! - my), 0);
  const den = xs.reduce((a, x) => a + (x - mx) ** 2, 0);
  return den ? num / den : 0;
}

export async function soakScenario(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const image = buildBusyboxImage('gzip');
  const d = await startWithPool({ plugins: process.env.BENCH_SOAK_PLUGINS ?? 'full', nodeArgs: ['--inspect=127.0.0.1:0', ...EXTRA_NODE_ARGS] });
  const inspector = await Inspector.connect(d.output);
  const heapDir = path.join(projectRoot, 'bench', 'results', 'soak-heap');
  if (SNAPSHOTS) mkdirSync(heapDir, { recursive: true });
  const instances = Array.from({ length: INSTANCES }, (_, i) => `soak${i}`);
  try {
    await importImage(d, image.unified, 'bb');
    const setup = new Client(d.socket);
    for (const name of instances) {
      await setup.settle('POST', '/1.0/instances', { name, source: { type: 'image', alias: 'bb' } });
      await setup.settle('PUT', `/1.0/instances/${name}/state`, { action: 'start' });
    }
    // A token lives until it is used: the operation the abandoned waits wait on.
    const token = (await setup.request('POST', '/1.0/certificates', { name: 'soak', type: 'client', token: true })).json?.operation as string;
    if (!token) throw new Error('the soak needs the certificates plugin (a token operation)');
    setup.close();
    await sleep(3000);
    const pid = d.child.pid!;
    const idle = { rss: rssMiB(pid), fds: openFds(pid) };
    await inspector.collectGarbage();
    const idleHeap = await inspector.heapUsedMiB();

    const samples: Sample[] = [];
    const t0 = Date.now();
    const stopAt = t0 + MINUTES * 60_000;
    const tally = new Map<string, { ok: number; failed: number; errors: Map<string, number> }>();
    const load = Promise.all(Array.from({ length: CLIENTS }, (_, i) => runClient(i, d.socket, instances, token, () => Date.now() >= stopAt, tally)));
    const probe = probeLatency(d.socket, stopAt, t0 + WARMUP_MS);
    let warmHeap: number | undefined;
    while (Date.now() < stopAt) {
      await sleep(Math.min(SAMPLE_MS, Math.max(0, stopAt - Date.now())));
      samples.push(await sample(d, inspector, t0));
      const last = samples.at(-1)!;
      process.stderr.write(`soak ${last.t.toFixed(0)}s: rss ${last.rss.toFixed(1)} MiB, heap ${last.heap.toFixed(1)} MiB, external ${last.external.toFixed(1)} MiB, fds ${last.fds}, ops ${last.operations}, children ${last.children}\n`);
      if (warmHeap === undefined && Date.now() - t0 >= WARMUP_MS) {
        // What is reachable once warm; the same measure at the end shows what the load kept.
        await inspector.collectGarbage();
        warmHeap = await inspector.heapUsedMiB();
        if (SNAPSHOTS) await inspector.snapshot(path.join(heapDir, 'after-warmup.heapsnapshot'));
        await inspector.startLoopDelay();
        if (CPU_PROFILE) await inspector.startProfile();
      }
    }
    const loopDelay = await inspector.loopDelay();
    if (CPU_PROFILE) await inspector.stopProfile(CPU_PROFILE);
    await inspector.collectGarbage();
    const endHeap = await inspector.heapUsedMiB();
    if (SNAPSHOTS) await inspector.snapshot(path.join(heapDir, 'end-of-load.heapsnapshot'));
    await load;
    const { latencies, failures: probeFailures } = await probe;
    await sleep(SETTLE_MS);
    const after = await sample(d, inspector, t0, true);
    await inspector.collectGarbage();
    const afterHeap = await inspector.heapUsedMiB();

    const warm = samples.filter((s) => s.t * 1000 >= WARMUP_MS);
    const warmWindow = warm.slice(0, 6);
    const endWindow = warm.slice(-6);
    const warmRss = mean(warmWindow.map((s) => s.rss));
    const endRss = mean(endWindow.map((s) => s.rss));
    const peakRss = Math.max(...warm.map((s) => s.rss));
    const slope = slopePerMinute(warm, (s) => s.rss);
    const heapSlope = slopePerMinute(warm, (s) => s.heap);
    const pass = peakRss <= warmRss * TOLERANCE;
    const requests = [...tally.values()].reduce((a, r) => a + r.ok + r.failed, 0);
    const sortedLatencies = [...latencies].sort((a, b) => a - b);
    const p50 = percentile(sortedLatencies, 0.5);
    const p99 = percentile(sortedLatencies, 0.99);
    const failures = Object.fromEntries([...tally].filter(([, r]) => r.failed).map(([action, r]) => [action, { failed: r.failed, errors: Object.fromEntries(r.errors) }]));

    results.soak = {
      minutes: MINUTES, clients: CLIENTS, instances: INSTANCES, warmup_s: WARMUP_MS / 1000, steps: requests,
      per_action: Object.fromEntries([...tally].map(([a, r]) => [a, { ok: r.ok, failed: r.failed }])), failures,
      idle: { rss_mib: idle.rss, heap_after_gc_mib: idleHeap, fds: idle.fds },
      after_warmup: { rss_mib: warmRss, heap_after_gc_mib: warmHeap },
      end: { rss_mib: endRss, peak_rss_mib: peakRss, heap_after_gc_mib: endHeap, fds: endWindow.at(-1)?.fds },
      rss_ratio_end_to_warm: endRss / warmRss, rss_ratio_peak_to_warm: peakRss / warmRss,
      rss_slope_mib_per_min: slope, heap_slope_mib_per_min: heapSlope,
      after_load: { ...after, heap_after_gc_mib: afterHeap },
      loop_delay_ms: loopDelay,
      get_1_0_ms: { count: latencies.length, p50, p99, max: sortedLatencies.at(-1) },
      pass, samples,
    };
    const f = (n: number) => n.toFixed(1);
    rows.push({ scenario: `soak: ${CLIENTS} clients, ${MINUTES} min, ${requests} steps (${Object.keys(failures).length ? `failures: ${Object.entries(failures).map(([a, r]) => `${a} ${r.failed}`).join(', ')}` : 'no failures'})`, value: '' });
    rows.push({ scenario: '  RSS idle (containers running) -> after warm-up -> end of load', value: `${f(idle.rss)} -> ${f(warmRss)} -> ${f(endRss)} MiB (end/warm ${(endRss / warmRss).toFixed(3)}, peak/warm ${(peakRss / warmRss).toFixed(3)})`, target: `every sample within ${Math.round((TOLERANCE - 1) * 100)}% of warm: ${pass ? 'PASS' : 'FAIL'}` });
    rows.push({ scenario: '  RSS slope after warm-up', value: `${slope.toFixed(2)} MiB/min (heap ${heapSlope.toFixed(2)} MiB/min)` });
    rows.push({ scenario: '  V8 heap after a full GC: idle -> warm -> end -> after load', value: `${f(idleHeap)} -> ${f(warmHeap ?? NaN)} -> ${f(endHeap)} -> ${f(afterHeap)} MiB` });
    rows.push({ scenario: `  GET /1.0 every ${PROBE_MS} ms beside the load (${latencies.length} after warm-up, ${probeFailures} failed): p50 / p99 / max`, value: `${p50.toFixed(2)} / ${p99.toFixed(2)} / ${(sortedLatencies.at(-1) ?? NaN).toFixed(1)} ms`, target: `p99 < 5 ms: ${p99 < 5 ? 'PASS' : 'FAIL'}` });
    rows.push({ scenario: '  the daemon\'s event loop delay after warm-up: p50 / p99 / max', value: `${loopDelay.p50.toFixed(2)} / ${loopDelay.p99.toFixed(2)} / ${loopDelay.max.toFixed(1)} ms` });
    rows.push({ scenario: '  open fds: idle -> end of load -> after load', value: `${idle.fds} -> ${endWindow.at(-1)?.fds} -> ${after.fds}` });
    rows.push({ scenario: `  after the load (${SETTLE_MS / 1000} s later)`, value: `RSS ${f(after.rss)} MiB, ${after.operations} operations running${after.operations ? ` (${after.running!.join(', ')})` : ''}, ${after.children} child processes`, target: 'near idle, 0 running, 0 children' });
  } finally {
    inspector.close();
    await d.stop();
    rmSync(image.dir, { recursive: true, force: true });
    if (existsSync(d.dir)) rmSync(d.dir, { recursive: true, force: true });
  }
}
