/**
 * `size` quotas through the real `lxc` client: custom volume sizes (create and set) and root disk
 * sizes (launch, device set, through a profile) are enforced on a btrfs pool (qgroups), and taken
 * without enforcement on dir, as the reference does.
 */
import test from 'ava';
import type { Daemon } from '../helpers/daemon.js';
import { startWithImage, stopImageDaemons } from '../helpers/image-daemon.js';
import { lxc, lxcOk, lxcWithInput } from '../helpers/clients.js';

let d: Daemon;

const run = (t: any, ...args: string[]) => lxcOk(t, d.socket, ...args);
/** Write `mib` MiB into `file` inside container `c`, synced so the quota accounting sees it. */
const write = (c: string, file: string, mib: number) => lxc(d.socket, 'exec', c, '--', 'dd', 'if=/dev/zero', `of=${file}`, 'bs=1M', `count=${mib}`, 'conv=fsync');

test.before(async () => {
  d = await startWithImage({ plugins: 'full' });
});

test.after.always(async () => {
  if (d) {
    for (const c of JSON.parse((await lxc(d.socket, 'list', '--format', 'json')).stdout || '[]')) await lxc(d.socket, 'delete', '--force', c.name);
    for (const v of ['q', 'qd']) await lxc(d.socket, 'storage', 'volume', 'delete', 'bp', v);
    await lxc(d.socket, 'profile', 'delete', 'small');
    await lxc(d.socket, 'storage', 'delete', 'bp');
  }
  await stopImageDaemons();
});

test.serial('custom volume size on btrfs: writes past it fail inside the container; set and unset change the limit', async (t) => {
  await run(t, 'storage', 'create', 'bp', 'btrfs', 'size=1GiB');
  await run(t, 'storage', 'volume', 'create', 'bp', 'q', 'size=20MiB');
  await run(t, 'launch', 'bb', 'cv');
  await run(t, 'storage', 'volume', 'attach', 'bp', 'q', 'cv', '/mnt/q');
  const over = await write('cv', '/mnt/q/big', 40);
  t.not(over.status, 0);
  t.regex(over.stderr, /quota|No space/i);
  // What did fit counts until removed.
  await lxc(d.socket, 'exec', 'cv', '--', 'rm', '-f', '/mnt/q/big');
  t.is((await write('cv', '/mnt/q/small', 4)).status, 0, 'under the limit');

  await run(t, 'storage', 'volume', 'set', 'bp', 'q', 'size', '100MiB');
  t.is((await write('cv', '/mnt/q/big', 40)).status, 0, 'the new limit holds 40 MiB');
  t.not((await write('cv', '/mnt/q/bigger', 80)).status, 0, 'but not 120');
  await lxc(d.socket, 'exec', 'cv', '--', 'rm', '-f', '/mnt/q/bigger');
  await run(t, 'storage', 'volume', 'unset', 'bp', 'q', 'size');
  t.is((await write('cv', '/mnt/q/bigger', 80)).status, 0, 'no limit once unset');
  await run(t, 'storage', 'volume', 'detach', 'bp', 'q', 'cv');
  await run(t, 'delete', 'cv', '--force');
});

test.serial('root disk size on btrfs: at launch, changed on the running container, and through a profile', async (t) => {
  await run(t, 'launch', 'bb', 'cr', '-s', 'bp', '-d', 'root,size=30MiB');
  const over = await write('cr', '/big', 50);
  t.not(over.status, 0);
  t.regex(over.stderr, /quota|No space/i);
  await lxc(d.socket, 'exec', 'cr', '--', 'rm', '-f', '/big');
  await run(t, 'config', 'device', 'set', 'cr', 'root', 'size=200MiB');
  t.is((await write('cr', '/big', 50)).status, 0, 'grown while running');
  await run(t, 'delete', 'cr', '--force');

  // A root disk from a profile; the profile's edit reaches the instance, stopped or running.
  await run(t, 'profile', 'create', 'small');
  const edited = await lxcWithInput(d.socket, 'devices:\n  root:\n    type: disk\n    path: /\n    pool: bp\n    size: 30MiB\n', 'profile', 'edit', 'small');
  t.is(edited.status, 0, edited.stderr);
  await run(t, 'init', 'bb', 'cp', '-p', 'small');
  await run(t, 'start', 'cp');
  t.not((await write('cp', '/big', 50)).status, 0, 'the profile size applies');
  await lxc(d.socket, 'exec', 'cp', '--', 'rm', '-f', '/big');
  await run(t, 'profile', 'device', 'set', 'small', 'root', 'size', '200MiB');
  t.is((await write('cp', '/big', 50)).status, 0, 'the profile edit grew it');
  await run(t, 'delete', 'cp', '--force');
});

test.serial('on dir, size is taken and not enforced (as the reference)', async (t) => {
  await run(t, 'storage', 'volume', 'create', 'default', 'dv', 'size=1MiB');
  await run(t, 'launch', 'bb', 'cd', '-d', 'root,size=1MiB');
  await run(t, 'storage', 'volume', 'attach', 'default', 'dv', 'cd', '/mnt/dv');
  t.is((await write('cd', '/mnt/dv/big', 4)).status, 0);
  t.is((await write('cd', '/big', 4)).status, 0);
  await run(t, 'config', 'device', 'set', 'cd', 'root', 'size=2MiB');
  await run(t, 'storage', 'volume', 'set', 'default', 'dv', 'size', '2MiB');
  await run(t, 'delete', 'cd', '--force');
  await run(t, 'storage', 'volume', 'delete', 'default', 'dv');
});

test.serial('a btrfs pool\'s volume.size limits new custom volumes and root disks that have no size, as the reference', async (t) => {
  await run(t, 'storage', 'set', 'bp', 'volume.size', '30MiB');
  await run(t, 'storage', 'volume', 'create', 'bp', 'qd');
  t.is((await run(t, 'storage', 'volume', 'get', 'bp', 'qd', 'size')).trim(), '30MiB');
  await run(t, 'launch', 'bb', 'cd', '-s', 'bp');
  await run(t, 'storage', 'volume', 'attach', 'bp', 'qd', 'cd', '/mnt/qd');
  t.not((await write('cd', '/mnt/qd/big', 50)).status, 0, 'the custom volume took the pool\'s size');
  await lxc(d.socket, 'exec', 'cd', '--', 'rm', '-f', '/mnt/qd/big');
  const over = await write('cd', '/big', 50);
  t.not(over.status, 0, 'the root disk without a size took the pool\'s size');
  t.regex(over.stderr, /quota|No space/i);
  await lxc(d.socket, 'exec', 'cd', '--', 'rm', '-f', '/big');
  // The device's own size wins over the pool's default.
  await run(t, 'config', 'device', 'set', 'cd', 'root', 'size=200MiB');
  t.is((await write('cd', '/big', 50)).status, 0);
  await run(t, 'storage', 'volume', 'detach', 'bp', 'qd', 'cd');
  await run(t, 'delete', 'cd', '--force');
  await run(t, 'storage', 'unset', 'bp', 'volume.size');
});
