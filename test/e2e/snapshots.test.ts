/** Snapshots, restores, copies and moves through the real `lxc` client and pylxd, on real containers. */
import test from 'ava';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { projectRoot, startWithPool, stopDaemons, killContainers, type Daemon } from '../helpers/daemon.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { importImage } from '../helpers/api.js';
import { lxc, lxcOk, python } from '../helpers/clients.js';

let d: Daemon;
let image: BusyboxImage;
let poolDir: string;

const run = (t: any, ...args: string[]) => lxcOk(t, d.socket, ...args);
const cat = async (t: any, name: string, file: string) => run(t, 'exec', name, '--', 'cat', file);

test.before(async () => {
  image = buildBusyboxImage('gzip');
  d = await startWithPool();
  await importImage(d, image.unified, 'bb');
  poolDir = mkdtempSync(path.join(tmpdir(), 'corral-e2e-pool-'));
  rmSync(poolDir, { recursive: true });
});

test.after.always(async () => {
  killContainers(d?.dir);
  await stopDaemons();
  rmSync(image.dir, { recursive: true, force: true });
  rmSync(poolDir, { recursive: true, force: true });
});

test.serial('lxc snapshot, info, restore, delete c/snap; lxc list counts snapshots', async (t) => {
  await run(t, 'launch', 'bb', 'c1');
  await run(t, 'exec', 'c1', '--', 'sh', '-c', 'echo one > /root/f');
  await run(t, 'snapshot', 'c1');
  await run(t, 'snapshot', 'c1', 'named');
  const info = await run(t, 'info', 'c1');
  t.regex(info, /Snapshots:/);
  t.regex(info, /snap0/);
  t.regex(info, /named/);
  const list = await run(t, 'list', 'c1', '--format', 'csv', '-c', 'nS');
  t.is(list.trim(), 'c1,2');

  await run(t, 'exec', 'c1', '--', 'sh', '-c', 'echo two > /root/f');
  await run(t, 'restore', 'c1', 'snap0');
  t.is((await cat(t, 'c1', '/root/f')).trim(), 'one', 'restored content, container running again');

  await run(t, 'delete', 'c1/named');
  t.notRegex(await run(t, 'info', 'c1'), /named/);
  await run(t, 'config', 'set', 'c1', 'snapshots.schedule', '0 6 * * *');
  t.is((await run(t, 'config', 'get', 'c1', 'snapshots.schedule')).trim(), '0 6 * * *');
  const bad = await lxc(d.socket, 'config', 'set', 'c1', 'snapshots.schedule', 'sometimes');
  t.not(bad.status, 0);
  t.regex(bad.stderr, /snapshots\.schedule/);
  await run(t, 'stop', 'c1', '--force');
});

test.serial('lxc copy: plain, --instance-only, from a snapshot, --refresh; lxc move rename and --storage', async (t) => {
  await run(t, 'init', 'bb', 'src');
  await run(t, 'file', 'push', '-', 'src/root/f');
  await run(t, 'snapshot', 'src', 's1');
  await run(t, 'copy', 'src', 'plain');
  t.regex(await run(t, 'info', 'plain'), /s1/);
  await run(t, 'copy', 'src', 'lean', '--instance-only');
  t.notRegex(await run(t, 'info', 'lean'), /Snapshots:/);
  await run(t, 'copy', 'src/s1', 'fromsnap');
  t.is((await run(t, 'list', 'fromsnap', '--format', 'csv', '-c', 'n')).trim(), 'fromsnap');

  await run(t, 'snapshot', 'src', 's2');
  await run(t, 'copy', 'src', 'plain', '--refresh');
  const refreshed = await run(t, 'info', 'plain');
  t.regex(refreshed, /s1/);
  t.regex(refreshed, /s2/);

  await run(t, 'move', 'lean', 'renamed');
  t.is((await run(t, 'list', 'renamed', '--format', 'csv', '-c', 'n')).trim(), 'renamed');
  await run(t, 'storage', 'create', 'other', 'dir', `source=${poolDir}`);
  await run(t, 'move', 'plain', '--storage', 'other');
  t.true(existsSync(path.join(poolDir, 'containers', 'plain', 'rootfs')));
  t.true(existsSync(path.join(poolDir, 'containers-snapshots', 'plain', 's2')));
  await run(t, 'start', 'plain');
  await run(t, 'stop', 'plain', '--force');
});

test.serial('pylxd: snapshots.create, restore, and a copy through instances.create', async (t) => {
  const res = await python(path.join(projectRoot, 'test', 'e2e', 'pylxd_snapshots.py'), [d.socket]);
  t.is(res.status, 0, res.stderr);
  const seen = JSON.parse(res.stdout);
  t.deepEqual(seen.snapshots, ['p1']);
  t.is(seen.after_restore, 'before');
  t.is(seen.copy_content, 'before');
  t.deepEqual(seen.copy_snapshots, ['p1']);
});
