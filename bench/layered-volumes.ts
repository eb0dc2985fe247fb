/**
 * Create and delete of containers made from an image on `dir`, for the 1 MB busybox image and a
 * large one (BENCH_LARGE_MB, 300 MB by default): layered (privileged, decision 0075: a mkdir and an
 * overlay mount) and copied (unprivileged: `cp -a` of the unpacked tree), each against the bare
 * tools doing the same in the same run (mkdir + mount / umount + rm; cp -a / rm -rf). Medians;
 * the first create of each image (its unpack into the pool) is not counted. Group `layered`.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { startDaemon, waitFor, type Daemon } from '../test/helpers/daemon.js';
import { buildBusyboxImage } from '../test/helpers/busybox-image.js';
import { buildLargeImage } from '../test/helpers/large-image.js';
import { importImage } from '../test/helpers/api.js';
import { call, median, type Row } from './containers.js';

const RUNS = Number(process.env.BENCH_LAYERED_RUNS ?? 7);
const LARGE_MB = Number(process.env.BENCH_LARGE_MB ?? 300);

const body = (name: string, alias: string, privileged: boolean) => ({
  name, source: alias ? { type: 'image', alias } : { type: 'none' }, config: privileged ? { 'security.privileged': 'true' } : {},
});

const since = (t0: number) => performance.now() - t0;

interface Pair { create: number; remove: number }

/** One create and delete through the API. */
async function apiOnce(d: Daemon, name: string, alias: string, privileged: boolean): Promise<Pair> {
  let t0 = performance.now();
  await call(d, 'POST', '/1.0/instances', body(name, alias, privileged));
  const create = since(t0);
  t0 = performance.now();
  await call(d, 'DELETE', `/1.0/instances/${name}`);
  return { create, remove: since(t0) };
}

/** The bare overlay: mkdir + mount, then umount + rm. */
function bareLayered(imageDir: string, dir: string): Pair {
  let t0 = performance.now();
  for (const p of ['upper', 'work', 'rootfs']) mkdirSync(path.join(dir, p), { recursive: true });
  execFileSync('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${imageDir}/rootfs,upperdir=${dir}/upper,workdir=${dir}/work`, `${dir}/rootfs`]);
  const create = since(t0);
  t0 = performance.now();
  execFileSync('umount', [`${dir}/rootfs`]);
  execFileSync('rm', ['-rf', '--one-file-system', dir]);
  return { create, remove: since(t0) };
}

/** The bare copy: cp -a, then rm -rf. */
function bareCopy(imageDir: string, dir: string): Pair {
  let t0 = performance.now();
  execFileSync('cp', ['-a', '--reflink=auto', '--no-target-directory', imageDir, dir]);
  const create = since(t0);
  t0 = performance.now();
  execFileSync('rm', ['-rf', '--one-file-system', dir]);
  return { create, remove: since(t0) };
}

const medians = (xs: Pair[]): Pair => ({ create: median(xs.map((x) => x.create)), remove: median(xs.map((x) => x.remove)) });

/** The four ways, interleaved run by run so that each sees the same load on a shared machine. */
async function measure(d: Daemon, alias: string, imageDir: string, scratch: string) {
  const runs = { layered: [] as Pair[], copied: [] as Pair[], bareLayered: [] as Pair[], bareCopy: [] as Pair[], empty: [] as Pair[] };
  for (let i = 0; i < RUNS; i++) {
    // The API's own floor: an instance with an empty volume (a mkdir), no image at all.
    runs.empty.push(await apiOnce(d, `x2b-${alias}-e-${i}`, '', true));
    runs.layered.push(await apiOnce(d, `x2b-${alias}-p-${i}`, alias, true));
    runs.bareLayered.push(bareLayered(imageDir, path.join(scratch, `o${i}`)));
    runs.copied.push(await apiOnce(d, `x2b-${alias}-u-${i}`, alias, false));
    runs.bareCopy.push(bareCopy(imageDir, path.join(scratch, `c${i}`)));
  }
  return { layered: medians(runs.layered), copied: medians(runs.copied), bareLayered: medians(runs.bareLayered), bareCopy: medians(runs.bareCopy), empty: medians(runs.empty) };
}

export async function layeredVolumeScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const small = buildBusyboxImage('gzip');
  const large = buildLargeImage(LARGE_MB);
  const d = await startDaemon({ plugins: 'edge', args: ['--init', 'auto'] });
  const scratch = path.join(d.dir, 'x2-bare');
  try {
    await waitFor(async () => (await d.request('GET', '/1.0/storage-pools')).json?.metadata?.length === 1, 10000, 'the init pool');
    const images = path.join(d.dir, 'storage-pools', 'default', 'images');
    for (const [alias, file, label] of [['bb', small.unified, 'busybox 1 MB'], ['big', large.file, `large ${LARGE_MB} MB`]] as const) {
      const fingerprint = await importImage(d, file, alias);
      // The unpack into the pool, not counted.
      await call(d, 'POST', '/1.0/instances', body(`x2b-${alias}-warm`, alias, true));
      await call(d, 'DELETE', `/1.0/instances/x2b-${alias}-warm`);
      const load = os.loadavg()[0]!.toFixed(2);
      mkdirSync(scratch, { recursive: true });
      const { layered, copied, bareLayered: bl, bareCopy: bc, empty } = await measure(d, alias, path.join(images, fingerprint), scratch);
      rmSync(scratch, { recursive: true, force: true });
      const tools = { layeredCreate: bl.create, layeredRemove: bl.remove, copyCreate: bc.create, copyRemove: bc.remove };
      results[`layered_${alias}`] = { layered, copied, empty, bare: tools, runs: RUNS, load };
      const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}x`;
      rows.push({ scenario: `${label}: layered create (privileged) vs mkdir + mount`, value: `${layered.create.toFixed(1)} ms vs ${tools.layeredCreate.toFixed(1)} ms = ${ratio(layered.create, tools.layeredCreate)} (load ${load})`, target: '<= 1.2x' });
      rows.push({ scenario: `${label}: layered delete vs umount + rm`, value: `${layered.remove.toFixed(1)} ms vs ${tools.layeredRemove.toFixed(1)} ms = ${ratio(layered.remove, tools.layeredRemove)}` });
      rows.push({ scenario: `${label}: copied create (unprivileged) vs cp -a`, value: `${copied.create.toFixed(1)} ms vs ${tools.copyCreate.toFixed(1)} ms = ${ratio(copied.create, tools.copyCreate)}` });
      rows.push({ scenario: `${label}: copied delete vs rm -rf`, value: `${copied.remove.toFixed(1)} ms vs ${tools.copyRemove.toFixed(1)} ms = ${ratio(copied.remove, tools.copyRemove)}` });
      rows.push({ scenario: `${label}: layered create vs copied create`, value: ratio(layered.create, copied.create) });
      rows.push({
        scenario: `${label}: API floor (empty instance) create / delete`,
        value: `${empty.create.toFixed(1)} / ${empty.remove.toFixed(1)} ms; layered beyond it: create ${(layered.create - empty.create).toFixed(1)} ms (bare ${tools.layeredCreate.toFixed(1)}), delete ${(layered.remove - empty.remove).toFixed(1)} ms (bare ${tools.layeredRemove.toFixed(1)})`,
      });
    }
  } finally {
    await d.stop();
    rmSync(small.dir, { recursive: true, force: true });
    rmSync(large.dir, { recursive: true, force: true });
  }
}
