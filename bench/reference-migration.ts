/**
 * The reference daemon (LXD 5.0.2) as the source of `lxc copy`: the same stopped busybox container
 * with three snapshots copied from one private reference into a second private reference and into
 * corral, all three over HTTPS on loopback with `dir` pools, alternated run by run. Corral as the
 * target should be no slower than the reference itself. Skipped (with its reason) where the
 * reference is not installed. Group `migration-reference` (`npm run bench -- migration-reference`).
 */
import { readFileSync, rmSync } from 'node:fs';
import { startWithPool, stopDaemons } from '../test/helpers/daemon.js';
import { buildBusyboxImage } from '../test/helpers/busybox-image.js';
import { referenceUnavailable, startReference, type ReferenceDaemon } from '../test/helpers/reference-daemon.js';
import { call, median, type Row } from './containers.js';
import { Remotes } from './remotes.js';

const RUNS = Number(process.env.BENCH_MIGRATION_RUNS ?? 7);
const SNAPSHOTS = 3;
const octet = { 'content-type': 'application/octet-stream' };

/** A request on the reference that must succeed, its operation too. */
async function refCall(ref: ReferenceDaemon, method: string, url: string, body?: unknown, headers?: Record<string, string>): Promise<any> {
  const res = await ref.call(method, url, body, headers);
  if (res.status >= 400 || (res.op && res.op.status !== 'Success')) throw new Error(`reference ${method} ${url}: ${res.op?.err ?? res.body}`);
  return res.op ?? res.json?.metadata;
}

export async function referenceMigrationScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const missing = referenceUnavailable();
  if (missing) {
    rows.push({ scenario: 'lxc copy reference -> corral vs reference -> reference', value: `skipped: ${missing}` });
    return;
  }
  const image = buildBusyboxImage('gzip');
  const remotes = new Remotes();
  const refs: ReferenceDaemon[] = [];
  try {
    refs.push(await startReference(), await startReference());
    const [source, other] = refs as [ReferenceDaemon, ReferenceDaemon];
    const corral = await startWithPool({ plugins: 'full' });
    await remotes.add('src', source, '127.0.18.5');
    await remotes.add('ref', other, '127.0.18.6');
    await remotes.add('cor', corral, '127.0.18.7');

    const up = await refCall(source, 'POST', '/1.0/images', readFileSync(image.unified), octet);
    await refCall(source, 'POST', '/1.0/instances', { name: 'c', source: { type: 'image', fingerprint: up.metadata.fingerprint } });
    for (let i = 1; i <= SNAPSHOTS; i++) {
      await refCall(source, 'POST', '/1.0/instances/c/files?path=/root/marker', Buffer.from(`snapshot ${i}\n`), octet);
      await refCall(source, 'POST', '/1.0/instances/c/snapshots', { name: `s${i}` });
    }

    const times = { reference: [] as number[], corral: [] as number[] };
    // Run 0 warms all three daemons; it is not counted.
    for (let i = 0; i <= RUNS; i++) {
      // Which target goes first changes each run, so neither always follows the other's writes.
      const order = i % 2 ? (['corral', 'reference'] as const) : (['reference', 'corral'] as const);
      const sample: Record<string, number> = {};
      for (const to of order) sample[to] = await remotes.ok('copy', 'src:c', `${to === 'corral' ? 'cor' : 'ref'}:c${i}`);
      await refCall(other, 'DELETE', `/1.0/instances/c${i}`);
      await call(corral, 'DELETE', `/1.0/instances/c${i}`);
      if (i > 0) for (const to of order) times[to].push(sample[to]!);
    }
    const m = { reference: median(times.reference), corral: median(times.corral) };
    const ratio = m.corral / m.reference;
    results.reference_migration_ms = { ...m, corral_to_reference_ratio: ratio, runs: RUNS, snapshots: SNAPSHOTS, samples: times };
    rows.push({
      scenario: `lxc copy reference -> corral, busybox + ${SNAPSHOTS} snapshots, dir (median of ${RUNS})`,
      value: `${m.corral.toFixed(0)} ms (reference -> reference ${m.reference.toFixed(0)} ms, ${ratio.toFixed(2)}x)${ratio <= 1 ? '' : ' MISSED'}`,
      target: '<= 1.0x reference -> reference',
    });
  } finally {
    for (const ref of refs) await ref.stop();
    await stopDaemons();
    remotes.remove();
    rmSync(image.dir, { recursive: true, force: true });
  }
}
