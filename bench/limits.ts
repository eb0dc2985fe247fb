/**
 * Start cost of kernel and hugepage limits: the same container started with four `limits.kernel.*`
 * prlimits and a `limits.hugepages.2MB` limit (where the host has hugetlb) against one without,
 * alternating rounds in one run so that the machine's load weighs on both alike.
 */
import { existsSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { startWithPool } from '../test/helpers/daemon.js';
import { buildBusyboxImage } from '../test/helpers/busybox-image.js';
import { importImage } from '../test/helpers/api.js';
import { call, median, type Row } from './containers.js';

const ROUNDS = Number(process.env.BENCH_LIMITS_ROUNDS ?? 7);

export async function limitsScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const image = buildBusyboxImage('gzip');
  const d = await startWithPool();
  try {
    await importImage(d, image.unified, 'bb');
    const limited: Record<string, string> = {
      'limits.kernel.nofile': '512', 'limits.kernel.nproc': '2000', 'limits.kernel.core': '0', 'limits.kernel.stack': '8388608:unlimited',
    };
    const hugetlb = existsSync('/sys/kernel/mm/hugepages/hugepages-2048kB');
    if (hugetlb) limited['limits.hugepages.2MB'] = '64MB';
    await call(d, 'POST', '/1.0/instances', { name: 'u5benchplain', source: { type: 'image', alias: 'bb' } });
    await call(d, 'POST', '/1.0/instances', { name: 'u5benchlimits', source: { type: 'image', alias: 'bb' }, config: limited });
    const cycle = async (name: string) => {
      const t0 = performance.now();
      await call(d, 'PUT', `/1.0/instances/${name}/state`, { action: 'start' });
      const ms = performance.now() - t0;
      await call(d, 'PUT', `/1.0/instances/${name}/state`, { action: 'stop', force: true });
      return ms;
    };
    // One unmeasured cycle each: the first start pays for idmap setup and cold caches.
    await cycle('u5benchplain');
    await cycle('u5benchlimits');
    const plain: number[] = [];
    const withLimits: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      plain.push(await cycle('u5benchplain'));
      withLimits.push(await cycle('u5benchlimits'));
    }
    const p = median(plain);
    const l = median(withLimits);
    results.limits_start = { plain_ms: p, limits_ms: l, ratio: l / p, rounds: ROUNDS, hugetlb };
    rows.push({
      scenario: `start with 4 kernel limits${hugetlb ? ' and a 2MB hugepage limit' : ''} (median of ${ROUNDS})`,
      value: `${l.toFixed(0)} ms (without: ${p.toFixed(0)} ms, ${(l / p).toFixed(2)}x)`,
      target: '<= 1.2x of the same container without',
    });
    await call(d, 'DELETE', '/1.0/instances/u5benchplain');
    await call(d, 'DELETE', '/1.0/instances/u5benchlimits');
  } finally {
    await d.stop();
  }
}
