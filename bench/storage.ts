/**
 * Storage driver scenarios: launching the busybox image on a btrfs pool (a clone of the image's
 * unpacked subvolume) against a dir pool (a file copy of it), median of create + start, and a
 * snapshot of a volume holding 200 MB on btrfs. Group `storage` (`npm run bench -- storage`).
 */
import { writeFileSync } from 'node:fs';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { startDaemon, waitFor, type Daemon } from '../test/helpers/daemon.js';
import { buildBusyboxImage } from '../test/helpers/busybox-image.js';
import { importImage } from '../test/helpers/api.js';
import { call, median, type Row } from './containers.js';

const RUNS = Number(process.env.BENCH_STORAGE_RUNS ?? 11);
const MB = 1000 * 1000;

const onPool = (name: string, pool: string) => ({
  name,
  source: { type: 'image', alias: 'bb' },
  devices: { root: { type: 'disk', path: '/', pool } },
});

/** Median of create + start on `pool`; the first launch (the image unpacked into the pool) is not counted. */
async function launches(d: Daemon, pool: string): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i <= RUNS; i++) {
    const name = `l-${pool}-${i}`;
    const t0 = performance.now();
    await call(d, 'POST', '/1.0/instances', onPool(name, pool));
    await call(d, 'PUT', `/1.0/instances/${name}/state`, { action: 'start' });
    if (i > 0) times.push(performance.now() - t0);
    await call(d, 'PUT', `/1.0/instances/${name}/state`, { action: 'stop', force: true });
    await call(d, 'DELETE', `/1.0/instances/${name}`);
  }
  return median(times);
}

/** 200 MB in a volume of the pool, then the median of a snapshot through the API (each deleted after). */
async function snapshots(d: Daemon, pool: string): Promise<{ ms: number; what: string }> {
  // A custom volume when the volume API is there, else the root volume of a stopped container.
  const custom = await d.request('POST', `/1.0/storage-pools/${pool}/volumes/custom`, { name: 'big' });
  let dir: string;
  let snapshotUrl: string;
  let what: string;
  if (custom.status < 300) {
    if (custom.json?.type === 'async') await d.request('GET', `${custom.json.operation}/wait?timeout=60`);
    dir = path.join(d.dir, 'storage-pools', pool, 'custom', 'big');
    snapshotUrl = `/1.0/storage-pools/${pool}/volumes/custom/big/snapshots`;
    what = 'custom volume';
  } else {
    await call(d, 'POST', '/1.0/instances', onPool('big', pool));
    dir = path.join(d.dir, 'storage-pools', pool, 'containers', 'big', 'rootfs');
    snapshotUrl = '/1.0/instances/big/snapshots';
    what = 'container volume';
  }
  for (let i = 0; i < 20; i++) writeFileSync(path.join(dir, `blob${i}`), Buffer.alloc(10 * MB, i + 1));
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    await call(d, 'POST', snapshotUrl, { name: `s${i}` });
    times.push(performance.now() - t0);
    await call(d, 'DELETE', `${snapshotUrl}/s${i}`);
  }
  return { ms: median(times), what };
}

export async function storageScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const image = buildBusyboxImage('gzip');
  const d = await startDaemon({ plugins: 'full', args: ['--init', 'auto'] });
  try {
    await waitFor(async () => (await d.request('GET', '/1.0/storage-pools')).json?.metadata?.length === 1, 10000, 'the init pool');
    await call(d, 'POST', '/1.0/storage-pools', { name: 'bt', driver: 'btrfs', config: { size: '4GiB' } });
    await importImage(d, image.unified, 'bb');
    const dir = await launches(d, 'default');
    const btrfs = await launches(d, 'bt');
    results.launch_dir_ms = { median: dir, runs: RUNS };
    results.launch_btrfs_ms = { median: btrfs, runs: RUNS };
    rows.push({ scenario: `launch busybox (create + start) on dir (median of ${RUNS})`, value: `${dir.toFixed(1)} ms` });
    rows.push({ scenario: `launch busybox (create + start) on btrfs (median of ${RUNS})`, value: `${btrfs.toFixed(1)} ms`, target: 'faster than on dir' });
    const snap = await snapshots(d, 'bt');
    results.snapshot_200mb_btrfs_ms = { median: snap.ms, runs: RUNS, volume: snap.what };
    rows.push({ scenario: `snapshot of a 200 MB ${snap.what} on btrfs (median of ${RUNS})`, value: `${snap.ms.toFixed(1)} ms`, target: '< 100 ms' });
  } finally {
    const list = await d.request('GET', '/1.0/instances');
    for (const url of list.json?.metadata ?? []) await call(d, 'DELETE', url).catch(() => {});
    await d.request('DELETE', '/1.0/storage-pools/bt/volumes/custom/big').catch(() => {});
    await d.request('DELETE', '/1.0/images/aliases/bb').catch(() => {});
    // The pool goes so its loop device does; its image volume with it once the image is gone.
    const images = await d.request('GET', '/1.0/images');
    for (const url of images.json?.metadata ?? []) await call(d, 'DELETE', url).catch(() => {});
    await d.request('DELETE', '/1.0/storage-pools/bt');
    await d.stop();
    rmSync(image.dir, { recursive: true, force: true });
  }
}
