/**
 * The cost of an intercepted mount inside an unprivileged container: a busybox loop of hugetlbfs
 * mounts (allowed, so the proxy mounts it for the caller) and umounts, against the same loop of
 * tmpfs (a type not allowed: the proxy hands it back to the kernel, which mounts it in the user
 * namespace), to show what the mount done by the proxy adds.
 */
import { readFileSync } from 'node:fs';
import { startWithPool } from '../test/helpers/daemon.js';
import { buildBusyboxImage } from '../test/helpers/busybox-image.js';
import { importImage } from '../test/helpers/api.js';
import { lxc } from '../test/helpers/clients.js';
import { call, median, timed, type Row } from './containers.js';

const MOUNTS = 100;

export async function syscallMountScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  if (!readFileSync('/proc/filesystems', 'utf8').includes('\thugetlbfs')) {
    rows.push({ scenario: 'intercepted mount inside an unprivileged container', value: 'skipped: the kernel has no hugetlbfs' });
    return;
  }
  const image = buildBusyboxImage('gzip');
  const d = await startWithPool();
  try {
    await importImage(d, image.unified, 'bb');
    await call(d, 'POST', '/1.0/instances', {
      name: 'mounting', source: { type: 'image', alias: 'bb' },
      config: { 'security.syscalls.intercept.mount': 'true', 'security.syscalls.intercept.mount.allowed': 'hugetlbfs' },
    });
    await call(d, 'PUT', '/1.0/instances/mounting/state', { action: 'start' });
    const loop = (type: string) => `mkdir -p /mnt/b && i=0; while [ $i -lt ${MOUNTS} ]; do mount -t ${type} none /mnt/b && umount /mnt/b || exit 1; i=$((i+1)); done`;
    const run = async (script: string) => {
      const res = await lxc(d.socket, 'exec', 'mounting', '--', 'sh', '-c', script);
      if (res.status !== 0) throw new Error(`the loop failed: ${res.stderr}`);
    };
    const intercepted: number[] = [];
    const kernel: number[] = [];
    for (let i = 0; i < 3; i++) {
      intercepted.push(await timed(() => run(loop('hugetlbfs'))));
      kernel.push(await timed(() => run(loop('tmpfs'))));
    }
    const perCall = median(intercepted) / MOUNTS;
    const overhead = (median(intercepted) - median(kernel)) / MOUNTS;
    results.intercepted_mount_ms = { per_call: perCall, over_kernel_mount: overhead, calls: MOUNTS };
    rows.push({
      scenario: `intercepted mount inside an unprivileged container (busybox loop of ${MOUNTS} hugetlbfs mount+umount, median of 3)`,
      value: `${perCall.toFixed(2)} ms a mount+umount, process starts included (${overhead.toFixed(2)} ms more than a tmpfs mount the kernel does)`,
    });
    await call(d, 'PUT', '/1.0/instances/mounting/state', { action: 'stop', force: true });
    await call(d, 'DELETE', '/1.0/instances/mounting');
  } finally {
    await d.stop();
  }
}
