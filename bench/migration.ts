/**
 * `lxc copy` of a stopped busybox container with three snapshots between two corral daemons over
 * HTTPS on loopback (pull mode, as `lxc copy` does by default): on btrfs pools (absolute time) and
 * on dir pools against a bare `rsync -a` of the same trees (instance and snapshots) between two
 * local directories, alternated run by run so the machine's load hits both alike. The same copy
 * driven straight through the API (no client) says how much of the time is the client's.
 * Group `migration` (`npm run bench -- migration`).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { startWithPool, type Daemon } from '../test/helpers/daemon.js';
import { startWithImage, stopImageDaemons } from '../test/helpers/image-daemon.js';
import { call, median, type Row } from './containers.js';
import { metered, medianCpu, type CpuTime } from './cpu.js';
import { RemoteClient } from '../test/helpers/remotes.js';

const RUNS = Number(process.env.BENCH_MIGRATION_RUNS ?? 7);
const SNAPSHOTS = 3;

/** A stopped container on `pool` with a file that changes between its three snapshots. */
export async function containerWithSnapshots(d: Daemon, name: string, pool: string): Promise<void> {
  await call(d, 'POST', '/1.0/instances', { name, source: { type: 'image', alias: 'bb' }, devices: { root: { type: 'disk', path: '/', pool } } });
  for (let i = 1; i <= SNAPSHOTS; i++) {
    const put = await d.request('POST', `/1.0/instances/${name}/files?path=/root/marker`, `snapshot ${i}\n`, { 'content-type': 'application/octet-stream' });
    if (put.status !== 200) throw new Error(`file push: ${put.body}`);
    await call(d, 'POST', `/1.0/instances/${name}/snapshots`, { name: `s${i}` });
  }
}

/** The floor: `rsync -a` of the instance's tree and its snapshots' into an empty directory beside. */
function bareRsync(pool: string, name: string, scratch: string): number {
  const dest = mkdtempSync(path.join(scratch, 'rsync-'));
  const t0 = performance.now();
  const run = spawnSync('rsync', ['-a', '--relative', `${pool}/./containers/${name}`, `${pool}/./containers-snapshots/${name}`, `${dest}/`]);
  const ms = performance.now() - t0;
  if (run.status !== 0) throw new Error(`rsync: ${run.stderr}`);
  rmSync(dest, { recursive: true, force: true });
  return ms;
}

/**
 * What `lxc copy` asks of the two daemons, without the client: the source's migration operation,
 * then the target's pull of it; answers when both operations ended.
 */
async function apiCopy(source: Daemon, sourceAddress: string, target: Daemon, name: string, copy: string, pool: string): Promise<number> {
  const t0 = performance.now();
  const offer = await source.request('POST', `/1.0/instances/${name}`, { migration: true, live: false, instance_only: false, name: copy });
  if (offer.status !== 202) throw new Error(`migration source: ${offer.body}`);
  const op = offer.json.metadata;
  const pulled = await target.request('POST', '/1.0/instances', {
    name: copy,
    devices: { root: { type: 'disk', path: '/', pool } },
    source: {
      type: 'migration', mode: 'pull', operation: `https://${sourceAddress}/1.0/operations/${op.id}`,
      certificate: readFileSync(path.join(source.dir, 'server.crt'), 'utf8'), secrets: op.metadata, instance_only: false,
    },
  });
  if (pulled.status !== 202) throw new Error(`migration target: ${pulled.body}`);
  const done = await target.request('GET', `${pulled.json.operation}/wait?timeout=120`);
  if (done.json?.metadata?.status !== 'Success') throw new Error(`migration target: ${done.json?.metadata?.err}`);
  await source.request('GET', `/1.0/operations/${op.id}/wait?timeout=120`);
  return performance.now() - t0;
}

/**
 * Empties and deletes a loop-file pool, so its loop device goes with it: its instances, then the
 * images (whose volumes it may hold).
 */
export async function dropPool(d: Daemon, pool: string): Promise<void> {
  const list = await d.request('GET', '/1.0/instances?recursion=1');
  for (const inst of list.json?.metadata ?? []) {
    if (inst.expanded_devices?.root?.pool === pool) await call(d, 'DELETE', `/1.0/instances/${inst.name}`).catch(() => {});
  }
  const images = await d.request('GET', '/1.0/images');
  for (const url of images.json?.metadata ?? []) await call(d, 'DELETE', url).catch(() => {});
  await d.request('DELETE', `/1.0/storage-pools/${pool}`);
}

export async function migrationScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const remotes = new RemoteClient('bench-remotes-17', 300_000);
  const source = await startWithImage({ plugins: 'full' });
  const target = await startWithPool({ plugins: 'full' });
  try {
    await remotes.add('r1', source, '127.0.18.1');
    await remotes.add('r2', target, '127.0.18.2');
    const sourceAddress = remotes.addresses.get('r1')!;
    for (const d of [source, target]) await call(d, 'POST', '/1.0/storage-pools', { name: 'bt', driver: 'btrfs', config: { size: '2GiB' } });
    await containerWithSnapshots(source, 'cdir', 'default');
    await containerWithSnapshots(source, 'cbt', 'bt');
    const dirPool = path.join(source.dir, 'storage-pools', 'default');

    const times = { dir: [] as number[], rsync: [] as number[], btrfs: [] as number[], apiDir: [] as number[], apiBtrfs: [] as number[] };
    const cpu = { dir: [] as Record<string, CpuTime>[], rsync: [] as Record<string, CpuTime>[], btrfs: [] as Record<string, CpuTime>[] };
    const parties = { bench: 'self' as const, source: source.child.pid!, target: target.child.pid! };
    const drop = async (name: string) => call(target, 'DELETE', `/1.0/instances/${name}`);
    // Run 0 warms both daemons, the pools and the page cache; it is not counted.
    for (let i = 0; i <= RUNS; i++) {
      const keep = i > 0;
      const sample = {
        dir: await metered(parties, () => remotes.must('copy', 'r1:cdir', `r2:d${i}`).then((r) => r.ms), keep ? cpu.dir : undefined),
        rsync: await metered(parties, () => bareRsync(dirPool, 'cdir', target.dir), keep ? cpu.rsync : undefined),
        btrfs: await metered(parties, () => remotes.must('copy', 'r1:cbt', `r2:b${i}`, '-s', 'bt').then((r) => r.ms), keep ? cpu.btrfs : undefined),
        apiDir: await apiCopy(source, sourceAddress, target, 'cdir', `ad${i}`, 'default'),
        apiBtrfs: await apiCopy(source, sourceAddress, target, 'cbt', `ab${i}`, 'bt'),
      };
      for (const name of [`d${i}`, `b${i}`, `ad${i}`, `ab${i}`]) await drop(name);
      if (keep) for (const [k, v] of Object.entries(sample)) times[k as keyof typeof times].push(v);
    }
    const m = Object.fromEntries(Object.entries(times).map(([k, v]) => [k, median(v)])) as Record<keyof typeof times, number>;
    const c = Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, medianCpu(v, median)])) as Record<keyof typeof cpu, Record<string, CpuTime>>;
    const ratio = m.dir / m.rsync;
    results.migration_copy_ms = { ...m, dir_to_rsync_ratio: ratio, runs: RUNS, snapshots: SNAPSHOTS, samples: times, cpu_ms: c };
    rows.push({ scenario: `lxc copy corral -> corral, busybox + ${SNAPSHOTS} snapshots, btrfs (median of ${RUNS})`, value: `${m.btrfs.toFixed(0)} ms${m.btrfs < 1000 ? '' : ' MISSED'}`, target: '< 1000 ms' });
    rows.push({ scenario: `lxc copy corral -> corral, same, dir (median of ${RUNS})`, value: `${m.dir.toFixed(0)} ms (bare rsync -a ${m.rsync.toFixed(0)} ms, ${ratio.toFixed(2)}x)${ratio <= 1.5 ? '' : ' MISSED'}`, target: '<= 1.5x bare rsync -a' });
    rows.push({ scenario: '  same copies through the API, no client: dir / btrfs', value: `${m.apiDir.toFixed(0)} ms / ${m.apiBtrfs.toFixed(0)} ms` });
    const split = (x: Record<string, CpuTime>) => `client ${x.bench!.children.toFixed(0)}, source daemon ${x.source!.self.toFixed(0)} + children ${x.source!.children.toFixed(0)}, target daemon ${x.target!.self.toFixed(0)} + children ${x.target!.children.toFixed(0)}`;
    rows.push({ scenario: '  CPU ms per copy, dir (median)', value: `${split(c.dir)}; bare rsync -a ${c.rsync.bench!.children.toFixed(0)}` });
    rows.push({ scenario: '  CPU ms per copy, btrfs (median)', value: split(c.btrfs) });
  } finally {
    for (const d of [source, target]) await dropPool(d, 'bt');
    await stopImageDaemons();
    remotes.remove();
  }
}
