/**
 * Network scenarios: creating a bridge network with DHCP and NAT (the defaults `lxc network create`
 * gets: automatic IPv4 and IPv6 subnets with NAT, dnsmasq, nftables rules) and deleting it again.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { startDaemon } from '../test/helpers/daemon.js';
import { median, type Row } from './containers.js';

const RUNS = Number(process.env.BENCH_NETWORK_RUNS ?? 15);

export async function networkScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const d = await startDaemon({ plugins: 'edge' });
  const create: number[] = [];
  const remove: number[] = [];
  try {
    for (let i = 0; i < RUNS; i++) {
      const name = `crtb${randomBytes(3).toString('hex')}`;
      let t0 = performance.now();
      const made = await d.request('POST', '/1.0/networks', { name, config: {} });
      create.push(performance.now() - t0);
      if (made.status !== 200) throw new Error(`network create failed: ${made.body}`);
      t0 = performance.now();
      const gone = await d.request('DELETE', `/1.0/networks/${name}`);
      remove.push(performance.now() - t0);
      if (gone.status !== 200) throw new Error(`network delete failed: ${gone.body}`);
    }
  } finally {
    await d.stop();
  }
  const both = create.map((c, i) => c + remove[i]!);
  results.network_create_ms = { median: median(create), runs: RUNS };
  results.network_delete_ms = { median: median(remove), runs: RUNS };
  results.network_create_delete_ms = { median: median(both), runs: RUNS };
  rows.push({ scenario: `network create, bridge with DHCP and NAT (median of ${RUNS})`, value: `${median(create).toFixed(0)} ms`, target: '< 300 ms' });
  rows.push({ scenario: '  its delete', value: `${median(remove).toFixed(0)} ms` });
  rows.push({ scenario: '  create + delete', value: `${median(both).toFixed(0)} ms` });
}
