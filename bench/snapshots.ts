/**
 * Snapshot scenarios on the dir pool: snapshot and restore of a stopped busybox container, a
 * gzip backup and its export, publishing the container as an image, and 20 snapshots at once.
 */
import { performance } from 'node:perf_hooks';
import type { Daemon } from '../test/helpers/daemon.js';
import { call, create, median, timed, type Row } from './containers.js';

const RUNS = Number(process.env.BENCH_SNAPSHOT_RUNS ?? 15);

async function snapshotRestore(d: Daemon, rows: Row[], results: Record<string, unknown>): Promise<void> {
  await create(d, 'snapbench');
  const snap: number[] = [];
  const restore: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    snap.push(await timed(() => call(d, 'POST', '/1.0/instances/snapbench/snapshots', { name: `s${i}` })));
    restore.push(await timed(() => call(d, 'PUT', '/1.0/instances/snapbench', { restore: `s${i}` })));
  }
  results.snapshot_ms = { median: median(snap), runs: RUNS };
  results.restore_ms = { median: median(restore), runs: RUNS };
  rows.push({ scenario: 'snapshot of a stopped container (dir), median', value: `${median(snap).toFixed(1)} ms`, target: '< 150 ms' });
  rows.push({ scenario: 'restore of a snapshot (dir), median', value: `${median(restore).toFixed(1)} ms`, target: '< 150 ms' });

  const backup: number[] = [];
  for (let i = 0; i < 5; i++) {
    backup.push(await timed(async () => {
      await call(d, 'POST', '/1.0/instances/snapbench/backups', { name: `b${i}`, compression_algorithm: 'gzip', instance_only: true });
      const res = await d.request('GET', `/1.0/instances/snapbench/backups/b${i}/export`);
      if (res.status !== 200) throw new Error(`export: ${res.status}`);
    }));
  }
  results.backup_export_gzip_ms = { median: median(backup), runs: 5 };
  rows.push({ scenario: 'backup (gzip) + export of it, median', value: `${median(backup).toFixed(0)} ms`, target: '< 1 s' });

  const publish: number[] = [];
  for (let i = 0; i < 3; i++) {
    let fingerprint = '';
    publish.push(await timed(async () => {
      const op = await call(d, 'POST', '/1.0/images', { source: { type: 'instance', name: 'snapbench' }, properties: { run: String(i) } });
      fingerprint = op.metadata.fingerprint;
    }));
    await call(d, 'DELETE', `/1.0/images/${fingerprint}`);
  }
  results.publish_ms = { median: median(publish), runs: 3 };
  rows.push({ scenario: 'publish a stopped container as an image (gzip), median', value: `${median(publish).toFixed(0)} ms` });
  await call(d, 'DELETE', '/1.0/instances/snapbench');
}

async function parallelSnapshots(d: Daemon, rows: Row[], results: Record<string, unknown>): Promise<void> {
  const names = Array.from({ length: 20 }, (_, i) => `psnap${i}`);
  for (const n of names) await create(d, n);
  const t0 = performance.now();
  const outcomes = await Promise.allSettled(names.map((n) => call(d, 'POST', `/1.0/instances/${n}/snapshots`, { name: 'p' })));
  const ms = performance.now() - t0;
  const failed = outcomes.filter((o) => o.status === 'rejected').length;
  results.parallel_snapshots = { count: 20, failed, ms };
  rows.push({ scenario: '20 snapshots in parallel on 20 instances', value: `${20 - failed}/20 succeeded in ${ms.toFixed(0)} ms`, target: 'all succeed' });
  for (const n of names) await call(d, 'DELETE', `/1.0/instances/${n}`).catch(() => {});
}

export async function snapshotScenarios(d: Daemon, rows: Row[], results: Record<string, unknown>): Promise<void> {
  await snapshotRestore(d, rows, results);
  await parallelSnapshots(d, rows, results);
}
