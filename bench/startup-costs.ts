/**
 * What each dependency and each plugin costs a daemon at start, in fresh node processes run with the
 * daemon's own flags: RSS and CPU milliseconds after importing one library alone (against a bare `node`
 * measured in the same run, the floor), then the kernel and the edge plugins one after the other in a
 * single process (each line the cost it adds to the ones before). Decision 0002 records the table.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { readFileSync } from 'node:fs';
import { nodeFlags, projectRoot } from '../test/helpers/daemon.js';
import { median, type Row } from './containers.js';

const ROUNDS = Number(process.env.BENCH_STARTUP_COST_ROUNDS ?? 5);

/**
 * Libraries the daemon depends on, each over the ones before it (the first package pays for node's
 * package loading machinery), in about the order the kernel meets them.
 */
const LIBRARIES = ['tapable', '@hapi/hapi', 'bunyan', 'sqlite3', 'semver', 'joi', 'ws', 'yaml', 'protobufjs', 'cockatiel', 'etcd3', 're2js'];

/** `ms`: CPU time (user + system) the process has used, which the machine's load skews less than wall time. */
interface Sample { rssMiB: number; ms: number }

/**
 * One fresh process: imports `steps` in order and prints, after each, the RSS (after a short settle so
 * lazily touched pages count) and the CPU time used so far.
 */
function probe(steps: string[]): Sample[] {
  const code = `
    import { readFileSync } from 'node:fs';
    const rss = () => Number(/VmRSS:\\s+(\\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))[1]) / 1024;
    const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
    const out = [];
    const settle = async () => {
      const ms = cpu();
      await new Promise((r) => setTimeout(r, 200));
      out.push({ rssMiB: rss(), ms });
    };
    for (const spec of ${JSON.stringify(steps)}) {
      await import(spec);
      await settle();
    }
    if (!out.length) await settle();
    console.log(JSON.stringify(out));`;
  const r = spawnSync(process.execPath, [...nodeFlags, '--input-type=module', '-e', code], { cwd: projectRoot, encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) throw new Error(`probe of ${steps.join(', ') || 'bare node'} failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as Sample[];
}

/** Medians over rounds, step by step. */
function probeMedian(steps: string[]): Sample[] {
  const runs = Array.from({ length: ROUNDS }, () => probe(steps));
  return runs[0]!.map((_, i) => ({ rssMiB: median(runs.map((r) => r[i]!.rssMiB)), ms: median(runs.map((r) => r[i]!.ms)) }));
}

const distUrl = (file: string) => pathToFileURL(path.join(projectRoot, 'dist', file)).href;

export async function startupCostScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const floor = probeMedian([])[0]!;
  const table: Record<string, { rss_mib: number; ms: number }> = {};
  const add = (label: string, s: Sample, base: Sample) => {
    const rss = s.rssMiB - base.rssMiB;
    const ms = s.ms - base.ms;
    table[label] = { rss_mib: Number(rss.toFixed(1)), ms: Number(ms.toFixed(1)) };
    rows.push({ scenario: `  ${label}`, value: `+${rss.toFixed(1)} MiB, +${ms.toFixed(0)} ms CPU` });
  };
  rows.push({ scenario: `bare node (the floor, same flags)`, value: `${floor.rssMiB.toFixed(1)} MiB, ${floor.ms.toFixed(0)} ms CPU` });
  rows.push({ scenario: 'each library, over the ones before it', value: '' });
  const libs = probeMedian(LIBRARIES);
  libs.forEach((s, i) => add(LIBRARIES[i]!, s, i === 0 ? floor : libs[i - 1]!));

  // The kernel, then the edge plugins in the order the loader imports them, each over what came before.
  const registry = JSON.parse(readFileSync(path.join(projectRoot, 'plugin-registry.json'), 'utf8')) as { plugins: { id: string; entry: string }[]; sets: Record<string, string[]> };
  const edge = registry.sets.edge!.map((id) => registry.plugins.find((p) => p.id === id)!);
  const steps = [distUrl('kernel/kernel.js'), ...edge.map((p) => distUrl(p.entry.replace(/\.ts$/, '.js')))];
  const labels = ['kernel (with its libraries)', ...edge.map((p) => `plugin ${p.id}`)];
  const chain = probeMedian(steps);
  rows.push({ scenario: 'kernel, then each edge plugin, over the step before', value: '' });
  chain.forEach((s, i) => add(labels[i]!, s, i === 0 ? floor : chain[i - 1]!));
  const all = chain[chain.length - 1]!;
  rows.push({ scenario: 'kernel and edge plugins imported (no store, no socket)', value: `${all.rssMiB.toFixed(1)} MiB (${(all.rssMiB / floor.rssMiB).toFixed(2)}x bare node), ${all.ms.toFixed(0)} ms CPU` });
  results.startup_costs = { floor_rss_mib: floor.rssMiB, floor_ms: floor.ms, rounds: ROUNDS, table, all_rss_mib: all.rssMiB, all_ms: all.ms };
}
