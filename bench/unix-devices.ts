/**
 * Start time of a container with 4 unix devices (3 unix-char, 1 unix-block on a loop device) and a
 * syscall deny list against the same container without them, alternating rounds in one daemon
 * (median each); and how long a loop device the kernel announces takes to appear in (and go from)
 * a running container with a unix-hotplug device, seen from the host through the container's root.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startWithPool } from '../test/helpers/daemon.js';
import { buildBusyboxImage } from '../test/helpers/busybox-image.js';
import { importImage } from '../test/helpers/api.js';
import { call, create, median, timed, type Row } from './containers.js';

const ROUNDS = Number(process.env.BENCH_UNIX_ROUNDS ?? 9);

export async function unixDeviceScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const image = buildBusyboxImage('gzip');
  const scratch = mkdtempSync(path.join(tmpdir(), 'u1-bench-'));
  writeFileSync(path.join(scratch, 'disk.img'), Buffer.alloc(1 << 20));
  const loop = execFileSync('losetup', ['-f', '--show', path.join(scratch, 'disk.img')], { encoding: 'utf8' }).trim();
  const d = await startWithPool({ plugins: 'full' });
  try {
    await importImage(d, image.unified, 'bb');
    await create(d, 'u1plain');
    await create(d, 'u1devs');
    await call(d, 'PATCH', '/1.0/instances/u1devs', {
      config: { 'security.syscalls.deny': 'mkdir\nchroot\nsethostname\nswapon' },
      devices: {
        null2: { type: 'unix-char', source: '/dev/null', path: '/dev/u1null' },
        zero2: { type: 'unix-char', source: '/dev/zero', path: '/dev/u1zero' },
        rand: { type: 'unix-char', source: '/dev/urandom', path: '/dev/u1random', mode: '0644' },
        disk: { type: 'unix-block', source: loop, path: '/dev/u1disk' },
      },
    });
    const start = (name: string) => timed(() => call(d, 'PUT', `/1.0/instances/${name}/state`, { action: 'start' }));
    const stop = (name: string) => call(d, 'PUT', `/1.0/instances/${name}/state`, { action: 'stop', force: true });
    const plain: number[] = [];
    const devs: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      plain.push(await start('u1plain'));
      await stop('u1plain');
      devs.push(await start('u1devs'));
      await stop('u1devs');
    }
    const p = median(plain);
    const u = median(devs);
    results.unix_devices_start = { with_4_devices_ms: u, without_ms: p, ratio: u / p, rounds: ROUNDS };
    rows.push({
      scenario: `container start with 4 unix devices and a syscall deny list (median of ${ROUNDS})`,
      value: `${u.toFixed(0)} ms (without ${p.toFixed(0)} ms, ${(u / p).toFixed(2)}x)`,
      target: '<= 1.2x',
    });
    for (const name of ['u1plain', 'u1devs']) await call(d, 'DELETE', `/1.0/instances/${name}`);
    await hotplugLatency(d, rows, results);
  } finally {
    await d.stop();
    execFileSync('losetup', ['-d', loop]);
    rmSync(image.dir, { recursive: true, force: true });
    rmSync(scratch, { recursive: true, force: true });
  }
}

const LOOP_NUMBER = 249;
const loopControl = (request: string) => execFileSync('/usr/bin/python3', ['-c',
  `import fcntl,os; fd=os.open('/dev/loop-control',os.O_RDWR); fcntl.ioctl(fd,${request},${LOOP_NUMBER})`]);

/** Milliseconds until `check` holds, polled every millisecond (bounded). */
async function until(check: () => boolean, boundMs = 10_000): Promise<number> {
  const t0 = performance.now();
  while (!check()) {
    if (performance.now() - t0 > boundMs) throw new Error(`not within ${boundMs} ms`);
    await new Promise((r) => setTimeout(r, 1));
  }
  return performance.now() - t0;
}

async function hotplugLatency(d: Awaited<ReturnType<typeof startWithPool>>, rows: Row[], results: Record<string, unknown>): Promise<void> {
  if (!existsSync('/dev/loop-control') || existsSync(`/sys/block/loop${LOOP_NUMBER}`)) return;
  await create(d, 'u1hot');
  await call(d, 'PATCH', '/1.0/instances/u1hot', { devices: { blocks: { type: 'unix-hotplug', subsystem: 'block' } } });
  await call(d, 'PUT', '/1.0/instances/u1hot/state', { action: 'start' });
  const pid = (await call(d, 'GET', '/1.0/instances/u1hot/state')).pid as number;
  const node = `/proc/${pid}/root/dev/loop${LOOP_NUMBER}`;
  const appear: number[] = [];
  const vanish: number[] = [];
  try {
    for (let i = 0; i < 5; i++) {
      loopControl('0x4C80');
      appear.push(await until(() => existsSync(node)));
      loopControl('0x4C81');
      vanish.push(await until(() => !existsSync(node)));
    }
  } finally {
    if (existsSync(`/sys/block/loop${LOOP_NUMBER}`)) loopControl('0x4C81');
    await call(d, 'PUT', '/1.0/instances/u1hot/state', { action: 'stop', force: true });
    await call(d, 'DELETE', '/1.0/instances/u1hot');
  }
  const a = median(appear);
  const v = median(vanish);
  results.unix_hotplug_latency = { appear_ms: a, vanish_ms: v, rounds: appear.length };
  rows.push({ scenario: 'unix-hotplug: an announced loop device inside the container (median of 5)', value: `appears ${a.toFixed(0)} ms, goes ${v.toFixed(0)} ms`, target: '-' });
}
