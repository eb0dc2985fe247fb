/**
 * Project limits and restrictions as the real `lxc` client meets them: `lxc --project p launch`
 * refused by a limit and by a restriction with the daemon's message shown, and `lxc project set`
 * refused below current use. The launches that pass run real containers.
 */
import test from 'ava';
import type { Daemon } from '../helpers/daemon.js';
import { startWithImage, stopImageDaemons } from '../helpers/image-daemon.js';
import { lxc, lxcOk, lxcRefused } from '../helpers/clients.js';

let d: Daemon;

const run = (t: any, ...args: string[]) => lxcOk(t, d.socket, ...args);

const refused = (t: any, ...args: string[]) => lxcRefused(t, d.socket, ...args);

test.before(async () => {
  d = await startWithImage({ plugins: 'full' });
});

test.after.always(stopImageDaemons);

test.serial('lxc --project p launch is refused by limits.containers and limits.memory, with the limit named', async (t) => {
  await run(t, 'project', 'create', 'lim', '-c', 'features.images=false', '-c', 'limits.containers=1', '-c', 'limits.memory=256MB');
  await run(t, '--project', 'lim', 'profile', 'device', 'add', 'default', 'root', 'disk', 'path=/', 'pool=default');

  t.regex(await refused(t, '--project', 'lim', 'launch', 'bb', 'c1'), /Error: Instance "c1" must set limits\.memory \(directly or through a profile\) because project "lim" sets limits\.memory/);
  t.regex(await refused(t, '--project', 'lim', 'launch', 'bb', 'c1', '-c', 'limits.memory=512MB'), /would exceed limits\.memory of project "lim": the total would be 488\.28MiB of the 256MB allowed/);
  await run(t, '--project', 'lim', 'launch', 'bb', 'c1', '-c', 'limits.memory=128MB');
  t.is((await run(t, '--project', 'lim', 'list', '--format', 'csv', '-c', 'ns')).trim(), 'c1,RUNNING');

  t.regex(await refused(t, '--project', 'lim', 'launch', 'bb', 'c2', '-c', 'limits.memory=64MB'), /Error: Creating instance "c2" would exceed limits\.containers of project "lim": it already has 1 containers of the 1 allowed/);
  t.regex(await refused(t, '--project', 'lim', 'copy', 'c1', 'c2'), /limits\.containers/);
  t.regex(await refused(t, '--project', 'lim', 'config', 'set', 'c1', 'limits.memory=1GB'), /Updating instance "c1" would exceed limits\.memory/);
  t.regex(await refused(t, 'project', 'set', 'lim', 'limits.memory=64MB'), /limits\.memory of project "lim" can't be 64MB: its instances already use 122\.07MiB/);
  t.regex(await refused(t, 'project', 'set', 'lim', 'limits.containers=0'), /limits\.containers of project "lim" can't be 0/);
  t.is((await run(t, 'project', 'get', 'lim', 'limits.memory')).trim(), '256MB', 'the refused change left the project as it was');

  await run(t, '--project', 'lim', 'delete', '-f', 'c1');
});

test.serial('lxc --project r launch is refused by restrictions, with the restriction named', async (t) => {
  await run(t, 'project', 'create', 'res', '-c', 'features.images=false', '-c', 'restricted=true');
  await run(t, '--project', 'res', 'profile', 'device', 'add', 'default', 'root', 'disk', 'path=/', 'pool=default');

  t.regex(await refused(t, '--project', 'res', 'launch', 'bb', 'c1', '-c', 'security.privileged=true'),
    /Error: Container "c1" of restricted project "res": privileged containers \(security\.privileged\) are forbidden \(restricted\.containers\.privilege=unprivileged\)/);
  t.regex(await refused(t, '--project', 'res', 'launch', 'bb', 'c1', '-c', 'security.nesting=true'), /restricted\.containers\.nesting=block/);
  t.regex(await refused(t, '--project', 'res', 'launch', 'bb', 'c1', '-c', 'raw.lxc=lxc.apparmor.profile=unconfined'), /low-level key "raw\.lxc" is forbidden/);
  t.is((await run(t, '--project', 'res', 'list', '--format', 'csv', '-c', 'n')).trim(), '', 'nothing was created');

  await run(t, '--project', 'res', 'launch', 'bb', 'c1');
  t.regex(await refused(t, '--project', 'res', 'config', 'device', 'add', 'c1', 'host', 'disk', 'source=/tmp', 'path=/mnt'), /restricted\.devices\.disk=managed/);
  t.regex(await refused(t, '--project', 'res', 'snapshot', 'c1'), /Error: Project "res" doesn't allow snapshots of its instances \(restricted\.snapshots=block\)/);
  t.regex(await refused(t, '--project', 'res', 'profile', 'set', 'default', 'security.privileged', 'true'), /Profile "default" of restricted project "res": privileged containers/);

  await run(t, 'project', 'set', 'res', 'restricted.snapshots=allow');
  await run(t, '--project', 'res', 'snapshot', 'c1', 'snap0');
  t.regex(await run(t, '--project', 'res', 'info', 'c1'), /snap0/);
  await run(t, '--project', 'res', 'delete', '-f', 'c1');
});

test.serial('limits.disk counts root disk sizes and custom volume sizes, not the project\'s images, as the reference does', async (t) => {
  const d2 = d as Daemon & { image: { unified: string } };
  await run(t, 'project', 'create', 'dsk', '-c', 'features.images=true', '-c', 'features.profiles=true', '-c', 'features.storage.volumes=true');
  await run(t, '--project', 'dsk', 'image', 'import', d2.image.unified, '--alias', 'bb');
  await run(t, '--project', 'dsk', 'profile', 'device', 'add', 'default', 'root', 'disk', 'path=/', 'pool=default', 'size=100MiB');
  await run(t, '--project', 'dsk', 'init', 'bb', 'c1');
  await run(t, '--project', 'dsk', 'storage', 'volume', 'create', 'default', 'v1', 'size=50MiB');
  // 150MiB exactly: the image (about 1MB) is not part of the total.
  t.regex(await run(t, 'project', 'info', 'dsk'), /\| DISK\s+\| UNLIMITED \| 150\.00MiB \|/);
  await run(t, 'project', 'set', 'dsk', 'limits.disk=157286400');
  await run(t, 'project', 'set', 'dsk', 'limits.disk=150MiB');
  t.regex(await refused(t, 'project', 'set', 'dsk', 'limits.disk=157286399'), /limits\.disk of project "dsk" can't be 157286399: its instances and volumes already use 150(\.00)?MiB/);
  // Snapshots count nothing either.
  await run(t, '--project', 'dsk', 'snapshot', 'c1', 's1');
  await run(t, '--project', 'dsk', 'storage', 'volume', 'snapshot', 'default', 'v1', 's1');
  t.regex(await run(t, 'project', 'info', 'dsk'), /\| DISK\s+\| 150\.00MiB \| 150\.00MiB \|/);
  await run(t, '--project', 'dsk', 'delete', 'c1');
  await run(t, '--project', 'dsk', 'storage', 'volume', 'delete', 'default', 'v1');
});
