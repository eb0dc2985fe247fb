/**
 * Daemon storage through the lxc client: `lxc config set storage.images_volume` and
 * `storage.backups_volume` on custom volumes, then `lxc image import`, `lxc image list`,
 * `lxc launch` and `lxc export` work with the files in the volumes; the volumes are held while
 * set; `lxc config unset` brings the files back.
 */
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startWithPool, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { lxc, lxcOk } from '../helpers/clients.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';

let d: Daemon;
let work: string;
let image: BusyboxImage;

const volumeDir = (name: string) => path.join(d.dir, 'storage-pools', 'default', 'custom', `default_${name}`);
const visible = (dir: string) => (existsSync(dir) ? readdirSync(dir).filter((e) => !e.startsWith('.')).sort() : []);

test.before(async () => {
  image = buildBusyboxImage();
  d = await startWithPool();
  work = mkdtempSync(path.join(tmpdir(), 'corral-daemon-storage-e2e-'));
});

test.after.always(async () => {
  await lxc(d.socket, 'delete', '-f', 'c1').catch(() => undefined);
  await stopDaemons();
  rmSync(work, { recursive: true, force: true });
  rmSync(image.dir, { recursive: true, force: true });
});

test.serial('lxc config set storage.images_volume and storage.backups_volume, then import, launch and export (daemon_storage)', async (t) => {
  await lxcOk(t, d.socket, 'storage', 'volume', 'create', 'default', 'imgs');
  await lxcOk(t, d.socket, 'storage', 'volume', 'create', 'default', 'bks');

  const missing = await lxc(d.socket, 'config', 'set', 'storage.images_volume', 'default/nope');
  t.not(missing.status, 0);
  t.regex(missing.stderr, /not found/);

  await lxcOk(t, d.socket, 'config', 'set', 'storage.images_volume', 'default/imgs');
  t.is((await lxcOk(t, d.socket, 'config', 'get', 'storage.images_volume')).trim(), 'default/imgs');
  await lxcOk(t, d.socket, 'image', 'import', image.unified, '--alias', 'bb');
  const fingerprint = JSON.parse(await lxcOk(t, d.socket, 'image', 'list', '--format', 'json'))[0].fingerprint as string;
  t.regex(await lxcOk(t, d.socket, 'image', 'list'), /\| bb /);
  t.deepEqual(visible(volumeDir('imgs')), [fingerprint], 'the image file is in the volume');
  t.deepEqual(visible(path.join(d.dir, 'images')), []);

  await lxcOk(t, d.socket, 'launch', 'bb', 'c1');
  t.regex(await lxcOk(t, d.socket, 'list', 'c1', '--format', 'csv', '-c', 'ns'), /c1,RUNNING/);

  await lxcOk(t, d.socket, 'config', 'set', 'storage.backups_volume', 'default/bks');
  const file = path.join(work, 'c1.tar.gz');
  await lxcOk(t, d.socket, 'export', 'c1', file, '--instance-only');
  t.true(statSync(file).size > 1000);
  const listing = spawnSync('tar', ['-tzf', file], { encoding: 'utf8' }).stdout;
  t.regex(listing, /backup\/index\.yaml/);
  t.true(existsSync(path.join(volumeDir('bks'), 'instances')), 'the backup was written in the backups volume');

  // Held while set.
  t.regex(await lxcOk(t, d.socket, 'storage', 'volume', 'show', 'default', 'imgs'), /used_by:\n- \/1\.0\n/);
  const del = await lxc(d.socket, 'storage', 'volume', 'delete', 'default', 'imgs');
  t.not(del.status, 0);
  t.regex(del.stderr, /in use by \/1\.0/);
  const snap = await lxc(d.socket, 'storage', 'volume', 'snapshot', 'default', 'bks');
  t.not(snap.status, 0);

  // Back to the data dir.
  await lxcOk(t, d.socket, 'config', 'unset', 'storage.images_volume');
  t.deepEqual(visible(path.join(d.dir, 'images')), [fingerprint]);
  await waitFor(() => visible(volumeDir('imgs')).length === 0, 5000, 'the volume to be emptied');
  await lxcOk(t, d.socket, 'storage', 'volume', 'delete', 'default', 'imgs');
  await lxcOk(t, d.socket, 'config', 'unset', 'storage.backups_volume');
  t.regex(await lxcOk(t, d.socket, 'image', 'list'), /\| bb /);
  await lxcOk(t, d.socket, 'export', 'c1', path.join(work, 'again.tar.gz'), '--instance-only');
  t.true(statSync(path.join(work, 'again.tar.gz')).size > 1000);
  t.true(existsSync(path.join(d.dir, 'backups', 'instances')));
});
