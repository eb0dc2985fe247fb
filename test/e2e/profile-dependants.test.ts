/**
 * A profile edit that would leave an instance using it invalid is refused, the instance running or
 * not, as the reference refuses removing the root disk its instances rely on (`lxc profile device
 * remove`, `lxc profile edit`, a root disk moved to another pool); the profile stays as it was.
 */
import test from 'ava';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { type Daemon } from '../helpers/daemon.js';
import { startWithImage, stopImageDaemons } from '../helpers/image-daemon.js';
import { lxc, lxcOk, lxcWithInput } from '../helpers/clients.js';

let d: Daemon;
const scratch = mkdtempSync(path.join(tmpdir(), 'corral-profile-deps-'));

test.before(async () => {
  d = await startWithImage();
});

test.after.always(async () => {
  await stopImageDaemons();
  rmSync(scratch, { recursive: true, force: true });
});

const rootOf = async (profile: string) => YAML.parse(await lxcOk({ is: () => undefined }, d.socket, 'profile', 'show', profile)).devices.root;

test.serial('the root disk of a profile its instances rely on cannot be removed, running or stopped', async (t) => {
  await lxcOk(t, d.socket, 'init', 'bb', 'stopped');
  const removed = await lxc(d.socket, 'profile', 'device', 'remove', 'default', 'root');
  t.not(removed.status, 0, 'a stopped instance relies on it');
  t.regex(removed.stderr, /instance "stopped" uses it and would be left without a root disk/);
  t.deepEqual(await rootOf('default'), { path: '/', pool: 'default', type: 'disk' });

  await lxcOk(t, d.socket, 'profile', 'create', 'rooted');
  await lxcOk(t, d.socket, 'profile', 'device', 'add', 'rooted', 'root', 'disk', 'path=/', 'pool=default');
  await lxcOk(t, d.socket, 'launch', 'bb', 'running', '-p', 'rooted');
  t.not((await lxc(d.socket, 'profile', 'device', 'remove', 'rooted', 'root')).status, 0, 'a running instance relies on it');
  const edited = await lxcWithInput(d.socket, 'config: {}\ndevices: {}\n', 'profile', 'edit', 'rooted');
  t.not(edited.status, 0, 'nor can an edit drop it');
  t.regex(edited.stderr, /instance "running"/);
  t.truthy(await rootOf('rooted'));
  // A second root disk would leave the instance with two.
  const twice = await lxc(d.socket, 'profile', 'device', 'add', 'rooted', 'root2', 'disk', 'path=/', 'pool=default');
  t.not(twice.status, 0);
  t.regex(twice.stderr, /more than one root disk/);
  // Nor may the root disk move to a pool the instance's volume is not on.
  await lxcOk(t, d.socket, 'storage', 'create', 'other', 'dir', `source=${path.join(scratch, 'other')}`);
  const moved = await lxc(d.socket, 'profile', 'device', 'set', 'rooted', 'root', 'pool=other');
  t.not(moved.status, 0);
  t.regex(moved.stderr, /from pool "default" to "other"/);
  t.is((await rootOf('rooted')).pool, 'default');

  // Other breakage of an instance that uses the profile: refused whole (the reference saves it and reports the instance).
  const missing = await lxc(d.socket, 'profile', 'device', 'add', 'rooted', 'data', 'disk', `source=${path.join(scratch, 'nowhere')}`, 'path=/mnt');
  t.not(missing.status, 0);
  t.regex(missing.stderr, /instance "running" uses it and would be left invalid: .*doesn't exist/);
  t.is(YAML.parse(await lxcOk(t, d.socket, 'profile', 'show', 'rooted')).devices.data, undefined);
  // An instance with its own root disk does not rely on the profile's: then the change is fine.
  await lxcOk(t, d.socket, 'stop', '-f', 'running');
  await lxcOk(t, d.socket, 'config', 'device', 'add', 'running', 'root', 'disk', 'path=/', 'pool=default');
  await lxcOk(t, d.socket, 'profile', 'device', 'remove', 'rooted', 'root');
  await lxcOk(t, d.socket, 'start', 'running');
  t.is((await lxcOk(t, d.socket, 'list', 'running', '--format', 'csv', '-c', 's')).trim(), 'RUNNING');
  // An instance broken before the edit (its disk's host path gone) does not block edits that do not break it.
  const gone = path.join(scratch, 'gone');
  mkdirSync(gone);
  await lxcOk(t, d.socket, 'config', 'device', 'add', 'stopped', 'data', 'disk', `source=${gone}`, 'path=/mnt');
  rmSync(gone, { recursive: true });
  await lxcOk(t, d.socket, 'profile', 'set', 'default', 'user.note', 'still editable');
  // A bad value is still refused.
  const nested = await lxc(d.socket, 'profile', 'set', 'default', 'security.nesting', 'maybe');
  t.not(nested.status, 0);
  t.not((await lxc(d.socket, 'profile', 'device', 'remove', 'default', 'root')).status, 0, 'the root disk it relies on is still kept');
  // Unused profiles change freely.
  await lxcOk(t, d.socket, 'profile', 'create', 'unused');
  await lxcOk(t, d.socket, 'profile', 'device', 'add', 'unused', 'root', 'disk', 'path=/', 'pool=default');
  await lxcOk(t, d.socket, 'profile', 'device', 'remove', 'unused', 'root');
  await lxcOk(t, d.socket, 'delete', '-f', 'running', 'stopped');
  await lxcOk(t, d.socket, 'storage', 'delete', 'other');
});
