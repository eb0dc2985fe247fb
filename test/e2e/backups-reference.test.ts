/**
 * Backups move between corral and the reference daemon (a private Debian lxd 5.0.2, see
 * helpers/reference-daemon.ts) in both directions, snapshots included, and the instances start.
 * The reference's container is started before its backup, so its root filesystem arrives
 * shifted to host ids, which corral shifts back.
 */
import test from 'ava';
import { lstatSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { startWithPool, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { callAndWait, importImage, download } from '../helpers/api.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { referenceUnavailable, startReference, type ReferenceDaemon } from '../helpers/reference-daemon.js';

const missing = referenceUnavailable();
const interop = missing ? test.skip : test.serial;
if (missing) console.warn(`Skipping the reference interoperability tests: ${missing}`);

let d: Daemon;
let ref: ReferenceDaemon;
let image: BusyboxImage;
// Both daemons drive liblxc on this host: container names must not collide with anything else running.
const suffix = randomBytes(3).toString('hex');

const octet = { 'content-type': 'application/octet-stream' };

test.before(async () => {
  if (missing) return;
  image = buildBusyboxImage('gzip');
  d = await startWithPool();
  await importImage(d, image.unified, 'bb');
  ref = await startReference();
  const up = await ref.call('POST', '/1.0/images', readFileSync(image.unified), octet);
  if (up.op?.status !== 'Success') throw new Error(`image import into the reference failed: ${up.op?.err ?? up.body}`);
  await ref.request('POST', '/1.0/images/aliases', { name: 'bb', target: up.op.metadata.fingerprint });
});

test.after.always(async () => {
  await ref?.stop();
  await stopDaemons();
  if (image) rmSync(image.dir, { recursive: true, force: true });
});

interop('a corral backup imports into the reference daemon', async (t) => {
  const name = `cor-${suffix}`;
  t.is((await callAndWait(d, 'POST', '/1.0/instances', { name, source: { type: 'image', alias: 'bb' }, config: { 'user.from': 'corral' } })).op.status, 'Success');
  await d.request('POST', `/1.0/instances/${name}/files?path=/root/interop`, Buffer.from('made by corral\n'), octet);
  t.is((await callAndWait(d, 'POST', `/1.0/instances/${name}/snapshots`, { name: 'snap0' })).op?.status, 'Success');
  t.is((await callAndWait(d, 'POST', `/1.0/instances/${name}/backups`, { name: 'for-ref' })).op.status, 'Success');
  const tarball = await download(d.socket, `/1.0/instances/${name}/backups/for-ref/export`);

  const imported = await ref.call('POST', '/1.0/instances', tarball, octet);
  t.is(imported.op?.status, 'Success', `${imported.op?.err ?? imported.body}\n${ref.log()}`);
  const info = (await ref.request('GET', `/1.0/instances/${name}`)).json.metadata;
  t.is(info.config['user.from'], 'corral');
  t.is(info.expanded_devices.root.pool, 'default');
  t.deepEqual((await ref.request('GET', `/1.0/instances/${name}/snapshots`)).json.metadata, [`/1.0/instances/${name}/snapshots/snap0`]);
  t.is((await ref.request('GET', `/1.0/instances/${name}/files?path=/root/interop`)).body, 'made by corral\n');

  const started = await ref.lxc('start', name);
  t.is(started.status, 0, `${started.stderr}\n${ref.log()}`);
  const cat = await ref.lxc('exec', name, '--', 'cat', '/root/interop');
  t.is(cat.stdout, 'made by corral\n', cat.stderr);
  t.is((await ref.lxc('delete', '--force', name)).status, 0);
});

interop('a reference backup imports into corral and starts', async (t) => {
  const name = `ref-${suffix}`;
  const created = await ref.lxc('init', 'bb', name);
  t.is(created.status, 0, created.stderr);
  await ref.request('POST', `/1.0/instances/${name}/files?path=/root/interop`, Buffer.from('made by the reference\n'), octet);
  t.is((await ref.lxc('snapshot', name, 'early')).status, 0);
  // Started once, so the reference shifts its files to host ids on disk.
  t.is((await ref.lxc('start', name)).status, 0, ref.log());
  t.is((await ref.lxc('stop', name, '--force')).status, 0);
  const backup = await ref.call('POST', `/1.0/instances/${name}/backups`, { name: 'for-corral' });
  t.is(backup.op?.status, 'Success', backup.op?.err);
  const tarball = await download(ref.socket, `/1.0/instances/${name}/backups/for-corral/export`);

  const imported = await callAndWait(d, 'POST', '/1.0/instances', tarball, octet);
  t.is(imported.op?.status, 'Success', imported.op?.err ?? imported.body);
  const info = (await d.request('GET', `/1.0/instances/${name}`)).json.metadata;
  t.is(info.expanded_devices.root.pool, 'default');
  t.deepEqual((await d.request('GET', `/1.0/instances/${name}/snapshots`)).json.metadata, [`/1.0/instances/${name}/snapshots/early`]);
  const file = path.join(d.dir, 'storage-pools', 'default', 'containers', name, 'rootfs', 'root', 'interop');
  t.is(lstatSync(file).uid, 0, 'shifted back to the container\'s own ids');

  t.is((await callAndWait(d, 'PUT', `/1.0/instances/${name}/state`, { action: 'start' })).op.status, 'Success');
  const exec = await callAndWait(d, 'POST', `/1.0/instances/${name}/exec`, { command: ['cat', '/root/interop'], 'record-output': true, 'wait-for-websocket': false, interactive: false });
  t.is(exec.op.metadata.return, 0);
  t.is((await d.request('GET', exec.op.metadata.output['1'])).body, 'made by the reference\n');
  const whoami = await callAndWait(d, 'POST', `/1.0/instances/${name}/exec`, { command: ['stat', '-c', '%u', '/root/interop'], 'record-output': true, 'wait-for-websocket': false, interactive: false });
  t.is((await d.request('GET', whoami.op.metadata.output['1'])).body.trim(), '0', 'owned by root inside the container');
  await callAndWait(d, 'PUT', `/1.0/instances/${name}/state`, { action: 'stop', force: true });
  await callAndWait(d, 'DELETE', `/1.0/instances/${name}`);
  await ref.lxc('delete', '--force', name);
});
