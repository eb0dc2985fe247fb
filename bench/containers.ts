/**
 * Container scenarios: the life cycle through the API against the bare lxc tools with corral's own
 * generated config (the liblxc floor), listing at 500 instances, mass creation, concurrent launches,
 * and daemon memory at scale.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { type Daemon, startWithPool } from '../test/helpers/daemon.js';
import { buildBusyboxImage } from '../test/helpers/busybox-image.js';
import { importImage } from '../test/helpers/api.js';
import { snapshotScenarios } from './snapshots.js';

export interface Row { scenario: string; value: string; target?: string }

export const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)]! : NaN;
};

const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;

/** A request that, when it answers with an operation, waits for it and fails on its failure. */
export async function call(d: Daemon, method: string, url: string, body?: unknown, waitSeconds = 120): Promise<any> {
  const res = await d.request(method, url, body);
  if (res.status >= 400) throw new Error(`${method} ${url}: ${res.json?.error ?? res.status}`);
  if (res.json?.type === 'async') {
    const op = await d.request('GET', `${res.json.operation}/wait?timeout=${waitSeconds}`);
    if (op.json?.metadata?.status !== 'Success') throw new Error(`${method} ${url}: ${op.json?.metadata?.err ?? 'operation did not succeed'}`);
    return op.json.metadata;
  }
  return res.json?.metadata;
}

export async function timed<T>(fn: () => Promise<T>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

export const create = (d: Daemon, name: string) => call(d, 'POST', '/1.0/instances', { name, source: { type: 'image', alias: 'bb' } });
const state = (d: Daemon, name: string, action: string) => call(d, 'PUT', `/1.0/instances/${name}/state`, { action, force: true });

function lxcTool(tool: string, args: string[]): void {
  execFileSync(tool, args, { stdio: 'ignore' });
}

async function lifecycle(d: Daemon, rows: Row[], results: Record<string, unknown>): Promise<void> {
  const RUNS = Number(process.env.BENCH_CYCLES ?? 15);
  const steps: Record<string, number[]> = { create: [], start: [], exec: [], stop: [], delete: [], cycle: [] };
  for (let i = 0; i < RUNS; i++) {
    const name = `cycle${i}`;
    const t0 = performance.now();
    steps.create!.push(await timed(() => create(d, name)));
    steps.start!.push(await timed(() => state(d, name, 'start')));
    steps.exec!.push(await timed(() => call(d, 'POST', `/1.0/instances/${name}/exec`, { command: ['true'], 'wait-for-websocket': false, interactive: false })));
    steps.stop!.push(await timed(() => state(d, name, 'stop')));
    steps.delete!.push(await timed(() => call(d, 'DELETE', `/1.0/instances/${name}`)));
    steps.cycle!.push(performance.now() - t0);
  }
  // The floor: the same liblxc config corral generated, driven with the bare tools. Each start
  // gets a fresh clone of the image as its rootfs, as every API start in the cycle above does:
  // liblxc's first start on a new rootfs costs ~10 ms more than a restart of a warm one.
  await create(d, 'floor');
  await state(d, 'floor', 'start');
  await state(d, 'floor', 'stop');
  const lxcpath = path.join(d.dir, 'containers');
  const lxcName = readdirSync(lxcpath).find((n) => n === 'floor' || n.endsWith('_floor'))!;
  const pool = path.join(d.dir, 'storage-pools', 'default');
  const imageDir = path.join(pool, 'images', readdirSync(path.join(pool, 'images')).find((n) => /^[0-9a-f]{64}$/.test(n))!);
  const volume = path.join(pool, 'containers', 'floor');
  // The bare create and delete are what the dir driver runs for an unprivileged container: a copy of the
  // unpacked image and a removal of the tree.
  const floor: Record<string, number[]> = { create: [], start: [], exec: [], stop: [], delete: [], cycle: [] };
  rmSync(volume, { recursive: true, force: true });
  for (let i = 0; i < RUNS; i++) {
    const round = [
      await timed(async () => execFileSync('cp', ['-a', '--reflink=auto', '--no-target-directory', imageDir, volume])),
      await timed(async () => lxcTool('lxc-start', ['-n', lxcName, '-P', lxcpath, '-d'])),
      await timed(async () => lxcTool('lxc-attach', ['-n', lxcName, '-P', lxcpath, '--clear-env', '--', 'true'])),
      await timed(async () => lxcTool('lxc-stop', ['-n', lxcName, '-P', lxcpath, '-k'])),
      await timed(async () => execFileSync('rm', ['-rf', '--one-file-system', '--', volume])),
    ];
    ['create', 'start', 'exec', 'stop', 'delete'].forEach((step, k) => floor[step]!.push(round[k]!));
    floor.cycle!.push(round.reduce((a, b) => a + b, 0));
  }
  execFileSync('cp', ['-a', '--reflink=auto', '--no-target-directory', imageDir, volume]);
  // Every API start above is the first start of a new container, which liblxc makes slower than a start of
  // one that ran before, even on a fresh rootfs: the same config under new names, each started once by the tools.
  const firstStarts: number[] = [];
  const config = readFileSync(path.join(lxcpath, lxcName, 'config'), 'utf8');
  for (let i = 0; i < RUNS; i++) {
    const name = `first${i}`;
    await create(d, name);
    const own = (text: string) => text.replaceAll(`/${lxcName}/`, `/${name}/`).replaceAll(`/floor/`, `/${name}/`).replace(/^lxc\.uts\.name = .*$/m, `lxc.uts.name = ${name}`);
    // What the daemon prepares at a start: the config, the seccomp profile, the log directory, the instance directory's owner.
    mkdirSync(path.join(lxcpath, name), { recursive: true });
    writeFileSync(path.join(lxcpath, name, 'config'), own(config));
    for (const file of readdirSync(path.join(lxcpath, lxcName)).filter((f) => f.endsWith('.profile'))) copyFileSync(path.join(lxcpath, lxcName, file), path.join(lxcpath, name, file));
    mkdirSync(path.join(d.dir, 'logs', name), { recursive: true });
    const owner = statSync(volume);
    chownSync(path.join(pool, 'containers', name), owner.uid, owner.gid);
    chmodSync(path.join(pool, 'containers', name), owner.mode & 0o7777);
    firstStarts.push(await timed(async () => lxcTool('lxc-start', ['-n', name, '-P', lxcpath, '-d'])));
    lxcTool('lxc-stop', ['-n', name, '-P', lxcpath, '-k']);
    await call(d, 'DELETE', `/1.0/instances/${name}`);
  }
  await call(d, 'DELETE', '/1.0/instances/floor');
  const m = Object.fromEntries(Object.entries(steps).map(([k, v]) => [k, median(v)]));
  const f = Object.fromEntries(Object.entries(floor).map(([k, v]) => [k, median(v)]));
  results.lifecycle_median_ms = m;
  results.lifecycle_floor_median_ms = { ...f, first_start: median(firstStarts) };
  const bareName: Record<string, string> = { create: 'bare cp -a', delete: 'bare rm -rf' };
  for (const step of ['create', 'start', 'exec', 'stop', 'delete']) {
    const fl = f[step]!;
    rows.push({
      scenario: `lifecycle ${step} (median of ${RUNS})`,
      value: `${m[step]!.toFixed(1)} ms (${bareName[step] ?? 'bare lxc tools'} ${fl.toFixed(1)} ms, ${(m[step]! / fl).toFixed(2)}x)`,
      target: '<= 1.2x the bare tools (issue 21)',
    });
  }
  const first = median(firstStarts);
  rows.push({ scenario: `lifecycle start against a bare first start of a new container (median of ${RUNS})`, value: `${m.start!.toFixed(1)} ms (bare ${first.toFixed(1)} ms, ${(m.start! / first).toFixed(2)}x)` });
  rows.push({ scenario: 'lifecycle whole cycle (median)', value: `${m.cycle!.toFixed(0)} ms (the bare tools' cycle ${f.cycle!.toFixed(0)} ms, ${(m.cycle! / f.cycle!).toFixed(2)}x)`, target: '< 60 ms on dir (issue 21; reference 1.1 s)' });
}

async function scale(d: Daemon, rows: Row[], results: Record<string, unknown>): Promise<void> {
  const COUNT = Number(process.env.BENCH_INSTANCES ?? 500);
  const RUNNING = Number(process.env.BENCH_RUNNING ?? 50);
  const rssIdle = rssMiB(d.child.pid!);
  const names = Array.from({ length: COUNT }, (_, i) => `s${i}`);
  let next = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: 4 }, async () => {
    while (next < names.length) await create(d, names[next++]!);
  }));
  const rate = COUNT / ((performance.now() - t0) / 1000);
  results.create_rate_per_s = rate;
  rows.push({ scenario: `create ${COUNT} instances at concurrency 4`, value: `${rate.toFixed(1)} /s`, target: '>= 40/s (reference 20/s)' });
  for (const name of names.slice(0, RUNNING)) await state(d, name, 'start');

  const listing = async (recursion: number) => {
    const times: number[] = [];
    for (let i = 0; i < 15; i++) times.push(await timed(() => d.request('GET', `/1.0/instances?recursion=${recursion}`)));
    return median(times);
  };
  const r1 = await listing(1);
  const r2 = await listing(2);
  results.list_500 = { recursion1_ms: r1, recursion2_ms: r2, running: RUNNING };
  rows.push({ scenario: `GET /1.0/instances?recursion=1, ${COUNT} instances (${RUNNING} running)`, value: `${r1.toFixed(1)} ms median`, target: '< 25 ms (reference 56 ms)' });
  rows.push({ scenario: `GET /1.0/instances?recursion=2, same`, value: `${r2.toFixed(1)} ms median`, target: '< 300 ms (reference 1.7 s)' });
  const rssLoaded = rssMiB(d.child.pid!);
  rows.push({ scenario: `daemon RSS with ${COUNT} instances`, value: `${rssLoaded.toFixed(1)} MiB (idle before: ${rssIdle.toFixed(1)} MiB)`, target: '< 150 MiB (reference 335 MiB)' });

  for (const name of names.slice(0, RUNNING)) await state(d, name, 'stop');
  next = 0;
  await Promise.all(Array.from({ length: 4 }, async () => {
    while (next < names.length) await call(d, 'DELETE', `/1.0/instances/${names[next++]!}`);
  }));
  global.gc?.();
  await new Promise((r) => setTimeout(r, 2000));
  const rssAfter = rssMiB(d.child.pid!);
  results.rss_scale_mib = { idle: rssIdle, loaded: rssLoaded, after_delete: rssAfter };
  rows.push({ scenario: 'daemon RSS after deleting them', value: `${rssAfter.toFixed(1)} MiB`, target: 'back near idle' });
}

async function concurrentLaunches(d: Daemon, rows: Row[], results: Record<string, unknown>): Promise<void> {
  const names = Array.from({ length: 20 }, (_, i) => `par${i}`);
  const t0 = performance.now();
  const outcomes = await Promise.allSettled(names.map(async (n) => {
    await create(d, n);
    await state(d, n, 'start');
  }));
  const ms = performance.now() - t0;
  const failed = outcomes.filter((o) => o.status === 'rejected').length;
  results.concurrent_launches = { count: 20, failed, ms };
  rows.push({ scenario: '20 concurrent launches', value: `${20 - failed}/20 succeeded in ${ms.toFixed(0)} ms`, target: 'all succeed' });
  for (const n of names) {
    await state(d, n, 'stop').catch(() => {});
    await call(d, 'DELETE', `/1.0/instances/${n}`).catch(() => {});
  }
}

export async function containerScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const image = buildBusyboxImage('gzip');
  const d = await startWithPool();
  try {
    await importImage(d, image.unified, 'bb');
    await lifecycle(d, rows, results);
    await concurrentLaunches(d, rows, results);
    await snapshotScenarios(d, rows, results);
    await scale(d, rows, results);
  } finally {
    await d.stop();
    rmSync(image.dir, { recursive: true, force: true });
    if (existsSync(d.dir)) rmSync(d.dir, { recursive: true, force: true });
  }
}
