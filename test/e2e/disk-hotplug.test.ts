/**
 * Disk devices added to and removed from a running container through the real `lxc` client:
 * `lxc storage volume attach/detach` and `lxc config device add/remove` of custom volumes and
 * host paths, with the ids files get on disk, and a volume attached live kept from deletion.
 */
import test from 'ava';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Daemon } from '../helpers/daemon.js';
import { startWithImage, stopImageDaemons } from '../helpers/image-daemon.js';
import { lxc, lxcOk } from '../helpers/clients.js';

let d: Daemon;

const run = (t: any, ...args: string[]) => lxcOk(t, d.socket, ...args);
const customDir = (name: string) => path.join(d.dir, 'storage-pools', 'default', 'custom', `default_${name}`);
const inside = (...command: string[]) => lxc(d.socket, 'exec', 'c', '--', ...command);

test.before(async () => {
  d = await startWithImage({ plugins: 'full' });
});

test.after.always(stopImageDaemons);

test.serial('lxc storage volume attach/detach and config device add/remove on a running container', async (t) => {
  await run(t, 'launch', 'bb', 'c');
  await run(t, 'storage', 'volume', 'create', 'default', 'v');
  writeFileSync(path.join(customDir('v'), 'note'), 'from the host\n');

  // Attached while running: there at once, files written inside keep container ids on disk.
  await run(t, 'storage', 'volume', 'attach', 'default', 'v', 'c', '/mnt/v');
  t.is((await inside('cat', '/mnt/v/note')).stdout, 'from the host\n');
  t.is((await inside('stat', '-c', '%u:%g', '/mnt/v/note')).stdout.trim(), '0:0');
  t.is((await inside('sh', '-c', 'echo hi > /mnt/v/made && chown 1000:1000 /mnt/v/made')).status, 0);
  t.is(readFileSync(path.join(customDir('v'), 'made'), 'utf8'), 'hi\n');
  t.is(statSync(path.join(customDir('v'), 'made')).uid, 1000);

  // In use while attached live.
  t.deepEqual((await d.request('GET', '/1.0/storage-pools/default/volumes/custom/v')).json.metadata.used_by, ['/1.0/instances/c']);
  const del = await lxc(d.socket, 'storage', 'volume', 'delete', 'default', 'v');
  t.not(del.status, 0);
  t.regex(del.stderr, /in use/);
  t.true(existsSync(path.join(customDir('v'), 'made')));

  // Detached while running: gone inside, the container runs on.
  await run(t, 'storage', 'volume', 'detach', 'default', 'v', 'c');
  t.not((await inside('cat', '/mnt/v/note')).status, 0);
  t.regex(await run(t, 'list', 'c', '--format', 'csv', '-c', 'ns'), /c,RUNNING/);

  // The same through config device add/remove, read-only, and a host path.
  await run(t, 'config', 'device', 'add', 'c', 'data', 'disk', 'pool=default', 'source=v', 'path=/srv/data', 'readonly=true');
  t.is((await inside('cat', '/srv/data/made')).stdout, 'hi\n');
  const ro = await inside('touch', '/srv/data/x');
  t.not(ro.status, 0);
  const host = path.join(d.dir, '..', `hostdir-${path.basename(d.dir)}`);
  mkdirSync(host, { recursive: true });
  writeFileSync(path.join(host, 'h'), 'host path\n');
  await run(t, 'config', 'device', 'add', 'c', 'hp', 'disk', `source=${host}`, 'path=/mnt/host');
  t.is((await inside('cat', '/mnt/host/h')).stdout, 'host path\n');
  await run(t, 'config', 'device', 'remove', 'c', 'hp');
  await run(t, 'config', 'device', 'remove', 'c', 'data');
  t.not((await inside('ls', '/srv/data/made')).status, 0);
  t.not((await inside('ls', '/mnt/host/h')).status, 0);
  rmSync(host, { recursive: true, force: true });

  // A device that cannot be mounted is refused and not recorded.
  const bad = await lxc(d.socket, 'config', 'device', 'add', 'c', 'bad', 'disk', 'pool=default', 'source=ghost', 'path=/mnt/ghost');
  t.not(bad.status, 0);
  t.is((await d.request('GET', '/1.0/instances/c')).json.metadata.devices.bad, undefined);

  // A restart keeps what was attached live (it is in the record).
  await run(t, 'storage', 'volume', 'attach', 'default', 'v', 'c', '/mnt/v');
  await run(t, 'restart', 'c', '--force');
  t.is((await inside('cat', '/mnt/v/made')).stdout, 'hi\n');
  await run(t, 'storage', 'volume', 'detach', 'default', 'v', 'c');
  t.not((await inside('ls', '/mnt/v/made')).status, 0);
  await run(t, 'delete', 'c', '--force');
  await run(t, 'storage', 'volume', 'delete', 'default', 'v');
});
