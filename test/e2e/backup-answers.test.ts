/**
 * Backups that do not exist, and backup directories that outlive their backups, compared with the
 * reference (LXD 5.0.2): a missing instance or volume backup, its owner or its pool is a 404 for
 * show, delete, export and rename, saying which one is missing; a new name that can never be valid
 * is a 400 before the backup is looked up. `<backups>/instances/<instance>` and
 * `<backups>/custom/<pool>/<volume>` exist only while they hold a backup: they go with the last
 * one (`lxc export` and `lxc storage volume export` leave none behind), and with their owner.
 */
import test from 'ava';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { killContainers, startWithPool, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { callAndWait, importImage, mustSucceed } from '../helpers/api.js';
import { hasLxc, lxc, lxcOk } from '../helpers/clients.js';

let d: Daemon;
let image: BusyboxImage;
let work: string;
const vols = '/1.0/storage-pools/default/volumes/custom';
const instanceDir = (name: string) => path.join(d.dir, 'backups', 'instances', name);
const volumeDir = (name: string) => path.join(d.dir, 'backups', 'custom', 'default', `default_${name}`);

test.before(async () => {
  if (!hasLxc()) return;
  image = buildBusyboxImage('gzip');
  work = mkdtempSync(path.join(tmpdir(), 'corral-backup-answers-'));
  d = await startWithPool();
  await importImage(d, image.unified, 'bb');
  await mustSucceed(d, 'POST', '/1.0/instances', { name: 'c1', source: { type: 'image', alias: 'bb' } });
  await mustSucceed(d, 'POST', vols, { name: 'v1' });
});

test.after.always(async () => {
  if (d) killContainers(d.dir);
  await stopDaemons();
  if (image) rmSync(image.dir, { recursive: true, force: true });
  if (work) rmSync(work, { recursive: true, force: true });
});

/** Status and message of a call through the socket, and the message `lxc query` prints for it. */
async function answer(method: string, url: string, body?: unknown): Promise<{ status: number; error: string; lxc: string }> {
  const res = await d.request(method, url, body);
  const args = ['query', '-X', method, ...(body === undefined ? [] : ['-d', JSON.stringify(body)]), url];
  const viaLxc = await lxc(d.socket, ...args);
  return { status: res.status, error: res.json?.error ?? '', lxc: viaLxc.status === 0 ? '' : viaLxc.stderr.trim() };
}

test.serial('missing backups, owners and pools answer 404 saying which is missing', async (t) => {
  if (!hasLxc()) return t.pass('lxc (lxd-client) is not installed');
  const cases: [string, RegExp][] = [
    ['/1.0/instances/c1/backups/nope', /instance backup not found/i],
    [`${vols}/v1/backups/nope`, /volume backup not found/i],
    ['/1.0/instances/missing/backups/nope', /instance not found/i],
    [`${vols}/missing/backups/nope`, /volume .*not found/i],
    ['/1.0/storage-pools/nopool/volumes/custom/v1/backups/nope', /storage pool not found/i],
  ];
  for (const [url, message] of cases) {
    for (const [method, suffix, body] of [['GET', ''], ['DELETE', ''], ['GET', '/export'], ['POST', '', { name: 'other' }]] as const) {
      const got = await answer(method, `${url}${suffix}`, body);
      t.is(got.status, 404, `${method} ${url}${suffix}: ${got.error}`);
      t.regex(got.error, message, `${method} ${url}${suffix}`);
      t.regex(got.lxc, message, `lxc query -X ${method} ${url}${suffix}`);
    }
  }
  t.regex((await answer('GET', '/1.0/storage-pools/nopool/volumes/custom/v1/backups')).error, /storage pool not found/i);
  // A name that can never be valid is refused first, as the reference does.
  for (const url of ['/1.0/instances/c1/backups/nope', `${vols}/v1/backups/nope`]) {
    const got = await answer('POST', url, { name: 'a/b' });
    t.is(got.status, 400, url);
    t.regex(got.lxc, /slash/i);
  }
});

test.serial('a backup directory goes with the last backup in it, and with its owner', async (t) => {
  if (!hasLxc()) return t.pass('lxc (lxd-client) is not installed');
  // lxc makes a backup, downloads it and deletes it: nothing stays.
  await lxcOk(t, d.socket, 'export', 'c1', path.join(work, 'c1.tar.gz'));
  t.false(existsSync(instanceDir('c1')), 'no instance backup directory after lxc export');
  t.regex(await lxcOk(t, d.socket, 'storage', 'volume', 'export', 'default', 'v1', path.join(work, 'v1.tar.gz')), /exported successfully/);
  t.false(existsSync(volumeDir('v1')), 'no volume backup directory after lxc storage volume export');

  for (const [base, dir] of [['/1.0/instances/c1/backups', instanceDir('c1')], [`${vols}/v1/backups`, volumeDir('v1')]]) {
    for (const name of ['b1', 'b2']) t.is((await callAndWait(d, 'POST', base, { name })).op?.status, 'Success');
    t.is((await callAndWait(d, 'POST', `${base}/b1`, { name: 'b3' })).op?.status, 'Success');
    t.is((await callAndWait(d, 'DELETE', `${base}/b2`)).op?.status, 'Success');
    t.true(existsSync(path.join(dir, 'b3')), `${dir} keeps what it still holds`);
    t.is((await callAndWait(d, 'DELETE', `${base}/b3`)).op?.status, 'Success');
    t.false(existsSync(dir), `${dir} went with its last backup`);
    t.true(existsSync(path.dirname(dir)), 'the directory above stays, as the reference keeps it');
  }

  // With their owner: renamed, then deleted.
  t.is((await callAndWait(d, 'POST', '/1.0/instances/c1/backups', { name: 'kept' })).op?.status, 'Success');
  t.is((await callAndWait(d, 'POST', `${vols}/v1/backups`, { name: 'kept' })).op?.status, 'Success');
  await lxcOk(t, d.socket, 'rename', 'c1', 'c2');
  await lxcOk(t, d.socket, 'storage', 'volume', 'rename', 'default', 'v1', 'v2');
  t.false(existsSync(instanceDir('c1')));
  t.false(existsSync(volumeDir('v1')));
  t.true(existsSync(path.join(instanceDir('c2'), 'kept')));
  t.true(existsSync(path.join(volumeDir('v2'), 'kept')));
  await lxcOk(t, d.socket, 'delete', 'c2');
  await lxcOk(t, d.socket, 'storage', 'volume', 'delete', 'default', 'v2');
  t.false(existsSync(instanceDir('c2')));
  t.false(existsSync(volumeDir('v2')));
});
