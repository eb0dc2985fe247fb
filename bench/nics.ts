/**
 * NIC scenario: a container start with one bridged NIC on a managed bridge network against the
 * same start without a NIC, in alternating rounds on one daemon.
 */
import { randomBytes } from 'node:crypto';
import { startWithPool } from '../test/helpers/daemon.js';
import { buildBusyboxImage } from '../test/helpers/busybox-image.js';
import { importImage } from '../test/helpers/api.js';
import { call, median, timed, type Row } from './containers.js';

const RUNS = Number(process.env.BENCH_NIC_RUNS ?? 10);

export async function nicScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const image = buildBusyboxImage('gzip');
  const d = await startWithPool();
  const net = `bn${randomBytes(3).toString('hex')}`;
  try {
    await importImage(d, image.unified, 'bb');
    const made = await d.request('POST', '/1.0/networks', { name: net, config: {} });
    if (made.status !== 200) throw new Error(`network create failed: ${made.body}`);
    await call(d, 'POST', '/1.0/instances', { name: 'plain', source: { type: 'image', alias: 'bb' } });
    await call(d, 'POST', '/1.0/instances', { name: 'nic', source: { type: 'image', alias: 'bb' }, devices: { eth0: { type: 'nic', network: net } } });
    const plain: number[] = [];
    const nic: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      for (const [name, times] of [['plain', plain], ['nic', nic]] as const) {
        times.push(await timed(() => call(d, 'PUT', `/1.0/instances/${name}/state`, { action: 'start' })));
        if (name === 'nic' && i === 0 && !(await call(d, 'GET', '/1.0/instances/nic/state')).network?.eth0) throw new Error('the NIC is missing');
        await call(d, 'PUT', `/1.0/instances/${name}/state`, { action: 'stop', force: true });
      }
    }
    const p = median(plain);
    const n = median(nic);
    results.start_with_bridged_nic_ms = { with_nic: n, without: p, difference: n - p, runs: RUNS };
    rows.push({
      scenario: `container start with one bridged NIC (median of ${RUNS})`,
      value: `${n.toFixed(1)} ms (without a NIC ${p.toFixed(1)} ms, ${n >= p ? '+' : ''}${(n - p).toFixed(1)} ms)`,
      target: 'within 150 ms of the start without a NIC',
    });
    for (const name of ['plain', 'nic']) await call(d, 'DELETE', `/1.0/instances/${name}`);
    await d.request('DELETE', `/1.0/networks/${net}`);
  } finally {
    await d.stop();
  }
}
