/**
 * Cold start to a serving socket and fresh RSS: the edge set from its bundle (what an edge device runs),
 * the edge set from the compiled tree, and the full set, against the floor measured in the same run:
 * bare `node` with the daemon's flags serving `GET /1.0` on a unix socket from a few lines of code.
 * Rounds alternate between them so that the machine's load weighs on all alike.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir, loadavg } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { corrald, edgeNodeFlags, mallocEnv, nodeFlags, projectRoot, superviseDaemon } from '../test/helpers/daemon.js';
import { median, type Row } from './containers.js';

const ROUNDS = Number(process.env.BENCH_STARTUP_ROUNDS ?? 5);
/** How long a started daemon idles before its RSS is read (what it settles at, not a peak of its start). */
const SETTLE_MS = 1500;
/**
 * How long a daemon idles before its RSS is read again: V8's memory reducer collects what the boot left about
 * 8 s after the boot's last full collection, if the daemon allocates little meanwhile (decision 0002).
 */
const IDLE_MS = 12_000;

export const EDGE_BUNDLE = path.join(projectRoot, 'dist', 'bundle', 'corrald-edge.cjs');
const FULL_BUNDLE = path.join(projectRoot, 'dist', 'bundle', 'corrald-full.cjs');

/** Bare node answering every request on a unix socket: the least any node daemon here can cost. */
const BARE_SERVER = `
const http = require('node:http');
http.createServer((req, res) => { res.setHeader('content-type', 'application/json'); res.end('{"type":"sync","status_code":200,"metadata":{}}'); })
  .listen(require('node:path').join(process.argv[1], 'unix.socket'));
process.on('SIGTERM', () => process.exit(0));`;

interface Variant {
  name: string;
  args: (dir: string) => string[];
  env?: NodeJS.ProcessEnv;
  /** A bundle started with its code cache: one start before the rounds, not counted, writes it (a build leaves none). */
  cached?: boolean;
  /** V8 flags, when not the full set's (config.nodeFlags). */
  flags?: string[];
  /** Also read RSS after IDLE_MS. */
  idle?: boolean;
}

const VARIANTS: Variant[] = [
  { name: 'bare node (floor)', args: (dir) => ['-e', BARE_SERVER, dir] },
  // As `npm run start:edge` runs it, with glibc's settings (decision 0002: it keeps boot's freed heap otherwise, 0–9 MiB by chance).
  { name: 'edge (bundle)', args: (dir) => [EDGE_BUNDLE, '--dir', dir], env: mallocEnv, cached: true, flags: edgeNodeFlags, idle: true },
  // What the code cache saves (scripts/bundle-loader.cjs): the same start as a first one, compiling everything.
  { name: 'edge (bundle, no code cache)', args: (dir) => [EDGE_BUNDLE, '--dir', dir], env: { ...mallocEnv, CORRAL_CODE_CACHE: 'none' }, flags: edgeNodeFlags },
  { name: 'edge (compiled tree)', args: (dir) => [corrald, '--dir', dir, '--plugins', 'edge'] },
  { name: 'full', args: (dir) => [corrald, '--dir', dir, '--plugins', 'full'] },
  // As `npm start` and the systemd unit run it.
  { name: 'full (bundle)', args: (dir) => [FULL_BUNDLE, '--dir', dir], env: mallocEnv, cached: true },
];

const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;

interface Sample {
  ms: number;
  rss: number;
  idleRss?: number;
}

async function once(v: Variant): Promise<Sample> {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-x1-startup-'));
  try {
    const t0 = performance.now();
    const child = spawn(process.execPath, [...(v.flags ?? nodeFlags), ...v.args(dir)], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, CORRAL_INIT_NETWORK: 'none', ...v.env } });
    const { daemon } = await superviseDaemon(child, { dir, socket: path.join(dir, 'unix.socket'), where: ` (${v.name})`, stopBoundMs: 30_000 });
    const ms = performance.now() - t0;
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const rss = rssMiB(child.pid!);
    let idleRss: number | undefined;
    if (v.idle) {
      await new Promise((r) => setTimeout(r, IDLE_MS - SETTLE_MS));
      idleRss = rssMiB(child.pid!);
    }
    await daemon.stop();
    return { ms, rss, idleRss };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function startupScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const load = loadavg()[0]!.toFixed(2);
  const samples = new Map(VARIANTS.map((v) => [v.name, [] as Sample[]]));
  for (const v of VARIANTS) if (v.cached) await once(v);
  for (let i = 0; i < ROUNDS; i++) for (const v of VARIANTS) samples.get(v.name)!.push(await once(v));
  const of = (name: string) => {
    const s = samples.get(name)!;
    const idle = s.flatMap((x) => (x.idleRss === undefined ? [] : [x.idleRss]));
    return { ms: median(s.map((x) => x.ms)), rss: median(s.map((x) => x.rss)), idleRss: idle.length > 0 ? median(idle) : undefined };
  };
  const floor = of(VARIANTS[0]!.name);
  rows.push({ scenario: `startup: ${ROUNDS} alternating rounds, medians, load ${load} at the start`, value: '' });
  for (const v of VARIANTS) {
    const m = of(v.name);
    const key = v.name.replace(/\W+/g, '_').replace(/_+$/, '');
    results[`startup_${key}`] = { start_ms: m.ms, rss_mib: m.rss, idle_rss_mib: m.idleRss, start_vs_floor: m.ms / floor.ms, rss_vs_floor: m.rss / floor.rss, load };
    const ratio = v === VARIANTS[0] ? '' : ` (${(m.ms / floor.ms).toFixed(2)}x the floor)`;
    const rssRatio = v === VARIANTS[0] ? '' : ` (${(m.rss / floor.rss).toFixed(2)}x the floor, +${(m.rss - floor.rss).toFixed(1)} MiB)`;
    rows.push({ scenario: `cold start to serving socket, ${v.name}`, value: `${m.ms.toFixed(0)} ms${ratio}`, target: v.name === 'edge (bundle)' ? '< 250 ms' : undefined });
    rows.push({ scenario: `RSS idle, freshly started, ${v.name}`, value: `${m.rss.toFixed(1)} MiB${rssRatio}`, target: v.name === 'edge (bundle)' ? '< 60 MiB' : v.name === 'full' || v.name === 'full (bundle)' ? '< 80 MiB' : undefined });
    if (m.idleRss !== undefined) rows.push({ scenario: `RSS ${IDLE_MS / 1000} s after serving, idle all along, ${v.name}`, value: `${m.idleRss.toFixed(1)} MiB` });
  }
}
