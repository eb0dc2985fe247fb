/**
 * A helper for making the scale bench flat (not a scenario): a daemon with BENCH_SCALE_PROFILE_COUNT
 * empty instances, then a V8 CPU profile of the requests named in argv (each asked 10 times), written
 * to BENCH_SCALE_PROFILE_OUT (a .cpuprofile for DevTools); BENCH_SCALE_NODE_ARGS: node options for the daemon. `node dist/bench/scale-profile.js '/1.0/instances?recursion=1'`
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { killContainers, startDaemon, startWithPool } from '../test/helpers/daemon.js';
import { Inspector } from '../test/helpers/inspector.js';
import { buildBusyboxImage } from '../test/helpers/busybox-image.js';
import { callAndWait, importImage } from '../test/helpers/api.js';

const COUNT = Number(process.env.BENCH_SCALE_PROFILE_COUNT ?? 1000);
const dir = mkdtempSync(path.join(tmpdir(), 'x3prof-'));
let d = await startWithPool({ plugins: 'full', dir, nodeArgs: ['--inspect=127.0.29.1:0', ...(process.env.BENCH_SCALE_NODE_ARGS ?? '').split(' ').filter(Boolean)] });
try {
  const inspector = await Inspector.connect(d.output);
  let next = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (next < COUNT) {
      const res = await d.request('POST', '/1.0/instances', { name: `x3p${next++}`, source: { type: 'none' } });
      await d.request('GET', `${res.json.operation}/wait?timeout=60`);
    }
  }));
  console.log(`created ${COUNT} in ${(performance.now() - t0).toFixed(0)} ms`);
  // BENCH_SCALE_PROFILE_RUNNING: that many busybox containers too, started (the restart then adopts them).
  const running = Number(process.env.BENCH_SCALE_PROFILE_RUNNING ?? 0);
  if (running > 0) {
    const image = buildBusyboxImage('gzip');
    await importImage(d, image.unified, 'bb');
    rmSync(image.dir, { recursive: true, force: true });
    for (let i = 0; i < running; i++) await callAndWait(d, 'POST', '/1.0/instances', { name: `x3pr${i}`, source: { type: 'image', alias: 'bb' } });
    const started = await callAndWait(d, 'PUT', '/1.0/instances', { state: { action: 'start' } });
    console.log(`started ${running}: ${started.op?.status} ${started.op?.err ?? ''}`);
  }
  await inspector.call('Profiler.enable');
  await inspector.call('Profiler.setSamplingInterval', { interval: 100 });
  await inspector.call('Profiler.start');
  for (const url of process.argv.slice(2)) {
    const times: number[] = [];
    for (let i = 0; i < 10; i++) {
      const t = performance.now();
      const res = await d.request('GET', url);
      times.push(performance.now() - t);
      if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
    }
    console.log(url, times.map((t) => t.toFixed(0)).join(' '));
  }
  const { profile } = await inspector.call('Profiler.stop');
  writeFileSync(process.env.BENCH_SCALE_PROFILE_OUT ?? '/tmp/x3prof/listing.cpuprofile', JSON.stringify(profile));
  inspector.close();
  if (process.env.BENCH_SCALE_PROFILE_RESTART) {
    // The boot with COUNT instances: a profile of the whole restart, written where the variable says.
    await d.stop();
    const t = performance.now();
    d = await startDaemon({ plugins: 'full', dir, nodeArgs: ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_SCALE_PROFILE_RESTART] });
    console.log(`restart to serving: ${(performance.now() - t).toFixed(0)} ms`);
  }
} finally {
  await d.stop();
  killContainers(dir);
  rmSync(dir, { recursive: true, force: true });
}
