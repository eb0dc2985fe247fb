/**
 * Volume listing at scale: 1,000 custom volumes on a dir pool, then the median of
 * GET /1.0/storage-pools/<pool>/volumes?recursion=1 (every volume rendered with its users).
 */
import { performance } from 'node:perf_hooks';
import { startDaemon } from '../test/helpers/daemon.js';
import { median, type Row } from './containers.js';

const VOLUMES = Number(process.env.BENCH_VOLUMES ?? 1000);
const RUNS = Number(process.env.BENCH_VOLUME_LIST_RUNS ?? 21);

export async function volumeScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const d = await startDaemon({ plugins: 'edge' });
  try {
    const pool = await d.request('POST', '/1.0/storage-pools', { name: 'bench', driver: 'dir' });
    if (pool.status !== 200) throw new Error(`pool create failed: ${pool.body}`);
    // Eight at a time: the creations themselves are not what is measured.
    for (let i = 0; i < VOLUMES; i += 8) {
      await Promise.all(Array.from({ length: Math.min(8, VOLUMES - i) }, async (_, k) => {
        const made = await d.request('POST', '/1.0/storage-pools/bench/volumes/custom', { name: `v${i + k}` });
        if (made.status !== 200) throw new Error(`volume create failed: ${made.body}`);
      }));
    }
    const times: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const t0 = performance.now();
      const res = await d.request('GET', '/1.0/storage-pools/bench/volumes?recursion=1');
      times.push(performance.now() - t0);
      if (res.status !== 200 || res.json.metadata.length !== VOLUMES) throw new Error(`listing gave ${res.status}, ${res.json?.metadata?.length} volumes`);
    }
    results.volume_list_1000_ms = { median: median(times), runs: RUNS, volumes: VOLUMES };
    rows.push({ scenario: `GET /volumes?recursion=1 with ${VOLUMES} custom volumes (median of ${RUNS})`, value: `${median(times).toFixed(1)} ms`, target: '< 100 ms' });
  } finally {
    await d.stop();
  }
}
