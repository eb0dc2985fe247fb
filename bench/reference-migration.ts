/**
 * The reference daemon (LXD 5.0.2) as the source of `lxc copy`: the same stopped busybox container
 * with three snapshots copied from one private reference into a second private reference and into
 * corral, all three over HTTPS on loopback with `dir` pools, alternated run by run. Corral as the
 * target should be no slower than the reference itself. Corral as the source (corral -> reference)
 * and each daemon's CPU time say which side a difference comes from. Skipped (with its reason) where the
 * reference is not installed. Group `migration-reference` (`npm run bench -- migration-reference`).
 */
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { startWithPool, stopDaemons } from '../test/helpers/daemon.js';
import { buildBusyboxImage } from '../test/helpers/busybox-image.js';
import { referenceUnavailable, startReference, type ReferenceDaemon } from '../test/helpers/reference-daemon.js';
import { call, median, type Row } from './containers.js';
import { importImage } from '../test/helpers/api.js';
import { metered, medianCpu, type CpuTime } from './cpu.js';
import { containerWithSnapshots } from './migration.js';
import { RemoteClient } from '../test/helpers/remotes.js';

const RUNS = Number(process.env.BENCH_MIGRATION_RUNS ?? 7);
const SNAPSHOTS = 3;
const octet = { 'content-type': 'application/octet-stream' };

/** A request on the reference that must succeed, its operation too. */
async function refCall(ref: ReferenceDaemon, method: string, url: string, body?: unknown, headers?: Record<string, string>): Promise<any> {
  const res = await ref.call(method, url, body, headers);
  if (res.status >= 400 || (res.op && res.op.status !== 'Success')) throw new Error(`reference ${method} ${url}: ${res.op?.err ?? res.body}`);
  return res.op ?? res.json?.metadata;
}

/** The pid of a private reference daemon: the `lxd` whose command line names its own log file. */
function referencePid(ref: ReferenceDaemon): number {
  const log = `${ref.dir}/lxd.log`;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (args[0]?.endsWith('lxd') && args.includes(log)) return Number(entry);
    } catch { /* gone meanwhile */ }
  }
  throw new Error(`no process of the reference daemon in ${ref.dir}`);
}

export async function referenceMigrationScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const missing = referenceUnavailable();
  if (missing) {
    rows.push({ scenario: 'lxc copy reference -> corral vs reference -> reference', value: `skipped: ${missing}` });
    return;
  }
  const image = buildBusyboxImage('gzip');
  const remotes = new RemoteClient('bench-remotes-17', 300_000);
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

    await importImage(corral, image.unified, 'bb');
    await containerWithSnapshots(corral, 'cc', 'default');

    // Three copies of a busybox container with three snapshots: into the reference, into corral, and
    // from corral into the reference (corral as the source).
    const copies = {
      reference: (i: number) => remotes.must('copy', 'src:c', `ref:c${i}`).then((r) => r.ms),
      corral: (i: number) => remotes.must('copy', 'src:c', `cor:c${i}`).then((r) => r.ms),
      fromCorral: (i: number) => remotes.must('copy', 'cor:cc', `ref:k${i}`).then((r) => r.ms),
    };
    type Kind = keyof typeof copies;
    const kinds = Object.keys(copies) as Kind[];
    const times = Object.fromEntries(kinds.map((k) => [k, [] as number[]])) as Record<Kind, number[]>;
    const cpu = Object.fromEntries(kinds.map((k) => [k, [] as Record<string, CpuTime>[]])) as Record<Kind, Record<string, CpuTime>[]>;
    const parties = { bench: 'self' as const, source: referencePid(source), reference: referencePid(other), corral: corral.child.pid! };
    // Run 0 warms all three daemons; it is not counted.
    for (let i = 0; i <= RUNS; i++) {
      // Which copy goes first changes each run, so none always follows another's writes.
      const order = kinds.map((_, j) => kinds[(i + j) % kinds.length]!);
      for (const kind of order) {
        const ms = await metered(parties, () => copies[kind](i), i > 0 ? cpu[kind] : undefined);
        if (i > 0) times[kind].push(ms);
      }
      await refCall(other, 'DELETE', `/1.0/instances/c${i}`);
      await refCall(other, 'DELETE', `/1.0/instances/k${i}`);
      await call(corral, 'DELETE', `/1.0/instances/c${i}`);
    }
    const m = Object.fromEntries(kinds.map((k) => [k, median(times[k])])) as Record<Kind, number>;
    const c = Object.fromEntries(kinds.map((k) => [k, medianCpu(cpu[k], median)])) as Record<Kind, Record<string, CpuTime>>;
    const ratio = m.corral / m.reference;
    results.reference_migration_ms = { ...m, corral_to_reference_ratio: ratio, runs: RUNS, snapshots: SNAPSHOTS, samples: times, cpu_ms: c };
    rows.push({
      scenario: `lxc copy reference -> corral, busybox + ${SNAPSHOTS} snapshots, dir (median of ${RUNS})`,
      value: `${m.corral.toFixed(0)} ms (reference -> reference ${m.reference.toFixed(0)} ms, ${ratio.toFixed(2)}x)${ratio <= 1 ? '' : ' MISSED'}`,
      target: '<= 1.0x reference -> reference',
    });
    rows.push({ scenario: '  corral as the source: lxc copy corral -> reference, same', value: `${m.fromCorral.toFixed(0)} ms (${(m.fromCorral / m.reference).toFixed(2)}x reference -> reference)` });
    const both = (x: CpuTime) => `${x.self.toFixed(0)} + children ${x.children.toFixed(0)}`;
    rows.push({
      scenario: '  CPU ms per copy (median): the target daemon',
      value: `reference target ${both(c.reference.reference!)}, corral target ${both(c.corral.corral!)}; the source reference ${both(c.reference.source!)} / ${both(c.corral.source!)}`,
    });
    rows.push({ scenario: '  CPU ms per copy (median): corral as the source', value: `corral ${both(c.fromCorral.corral!)}, reference target ${both(c.fromCorral.reference!)}` });
  } finally {
    for (const ref of refs) await ref.stop();
    await stopDaemons();
    remotes.remove();
    rmSync(image.dir, { recursive: true, force: true });
  }
}
