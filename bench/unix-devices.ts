/**
 * Start time of a container with 4 unix devices (3 unix-char, 1 unix-block on a loop device)
 * against the same container without them, alternating rounds in one daemon (median each).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
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
      scenario: `container start with 4 unix devices (median of ${ROUNDS})`,
      value: `${u.toFixed(0)} ms (without ${p.toFixed(0)} ms, ${(u / p).toFixed(2)}x)`,
      target: '<= 1.2x',
    });
    for (const name of ['u1plain', 'u1devs']) await call(d, 'DELETE', `/1.0/instances/${name}`);
  } finally {
    await d.stop();
    execFileSync('losetup', ['-d', loop]);
    rmSync(image.dir, { recursive: true, force: true });
    rmSync(scratch, { recursive: true, force: true });
  }
}
