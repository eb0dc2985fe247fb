/**
 * usb/gpu devices at start: a container with three non-required usb devices (the host has none,
 * so each start reads /sys/bus/usb/devices and goes on) against the same container without them,
 * alternated; and how long a start refused for a required absent gpu takes to answer.
 */
import { startWithPool } from '../test/helpers/daemon.js';
import { buildBusyboxImage } from '../test/helpers/busybox-image.js';
import { importImage } from '../test/helpers/api.js';
import { call, create, median, timed, type Row } from './containers.js';

const ROUNDS = Number(process.env.BENCH_HW_ROUNDS ?? 7);

export async function hostHardwareScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const image = buildBusyboxImage('gzip');
  const d = await startWithPool({ plugins: 'full' });
  const state = (name: string, action: string) => call(d, 'PUT', `/1.0/instances/${name}/state`, { action, force: true });
  try {
    await importImage(d, image.unified, 'bb');
    await create(d, 'u4hwplain');
    await create(d, 'u4hwusb');
    const usb = Object.fromEntries([1, 2, 3].map((i) => [`usb${i}`, { type: 'usb', vendorid: `abc${i}` }]));
    await call(d, 'PATCH', '/1.0/instances/u4hwusb', { devices: usb });
    const plain: number[] = [];
    const withUsb: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      plain.push(await timed(() => state('u4hwplain', 'start')));
      await state('u4hwplain', 'stop');
      withUsb.push(await timed(() => state('u4hwusb', 'start')));
      await state('u4hwusb', 'stop');
    }
    await call(d, 'PATCH', '/1.0/instances/u4hwplain', { devices: { gpu: { type: 'gpu', vendorid: '10de' } } });
    const refused: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      refused.push(await timed(async () => {
        const ok = await state('u4hwplain', 'start').then(() => true, () => false);
        if (ok) throw new Error('a start with an absent gpu succeeded');
      }));
    }
    const [p, u, r] = [median(plain), median(withUsb), median(refused)];
    results.host_hardware = { start_plain_ms: p, start_with_3_usb_ms: u, ratio: u / p, refused_gpu_start_ms: r, rounds: ROUNDS };
    rows.push({
      scenario: `start with 3 non-required absent usb devices (median of ${ROUNDS})`,
      value: `${u.toFixed(0)} ms (without ${p.toFixed(0)} ms, ${(u / p).toFixed(2)}x)`,
      target: '<= 1.1x of without',
    });
    rows.push({ scenario: 'start refused for a required absent gpu', value: `${r.toFixed(1)} ms`, target: 'answers without making the container' });
    await call(d, 'DELETE', '/1.0/instances/u4hwplain');
    await call(d, 'DELETE', '/1.0/instances/u4hwusb');
  } finally {
    await d.stop();
  }
}
