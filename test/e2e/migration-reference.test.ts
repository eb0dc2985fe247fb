/**
 * Instance migration between corral and a private reference daemon (LXD 5.0.2), both over HTTPS on
 * loopback, pull mode, `dir` pools, with the real `lxc` as the go-between: a stopped container with a
 * snapshot copies from the reference into corral and starts there; one made on corral copies into the
 * reference and starts there.
 */
import test from 'ava';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { RemoteClient } from '../helpers/remotes.js';
import { startReferencePair, stopReferencePair } from '../helpers/reference-pair.js';
import type { ImageDaemon } from '../helpers/image-daemon.js';
import { referenceUnavailable, type ReferenceDaemon } from '../helpers/reference-daemon.js';

const missing = referenceUnavailable();
const interop = missing ? test.skip : test.serial;
if (missing) console.warn(`Skipping the reference migration tests: ${missing}`);

const PASSWORD = 'migr-ref-17';
const client = new RemoteClient(PASSWORD);
const { lxc: remoteLxc, ok } = client;
client.describeFailure = () => `\n${ref?.log().slice(-3000) ?? ''}`;
const octet = { 'content-type': 'application/octet-stream' };
const suffix = randomBytes(3).toString('hex');
let corral: ImageDaemon;
let ref: ReferenceDaemon;

test.before(async () => {
  if (missing) return;
  ({ corral, ref } = await startReferencePair(client, '127.0.17.3', '127.0.17.4'));
});

test.after.always(() => stopReferencePair({ corral, ref }, client));

interop('lxc copy ref:c cor:c brings a stopped reference container with its snapshot; it starts on corral', async (t) => {
  const name = `h17migr-r-${suffix}`;
  t.is((await ref.lxc('init', 'bb', name, '-c', 'user.from=reference')).status, 0, ref.log());
  await ref.request('POST', `/1.0/instances/${name}/files?path=/root/marker`, Buffer.from('first\n'), octet);
  t.is((await ref.lxc('snapshot', name, 'snap0')).status, 0);
  await ref.request('POST', `/1.0/instances/${name}/files?path=/root/marker`, Buffer.from('second\n'), octet);

  await ok(t, 'copy', `ref:${name}`, `cor:${name}`);
  const inst = JSON.parse(await ok(t, 'query', `cor:/1.0/instances/${name}`));
  t.is(inst.config['user.from'], 'reference');
  const snaps = JSON.parse(await ok(t, 'query', `cor:/1.0/instances/${name}/snapshots?recursion=1`));
  t.deepEqual(snaps.map((s: any) => s.name), ['snap0']);
  t.is(snaps[0].config['user.from'], 'reference');
  t.is((await corral.request('GET', `/1.0/instances/${name}/files?path=/root/marker`)).body, 'second\n');
  await ok(t, 'start', `cor:${name}`);
  t.is(await ok(t, 'exec', `cor:${name}`, '--', 'cat', '/root/marker'), 'second\n');
  await ok(t, 'stop', `cor:${name}`, '--force');
  await ok(t, 'restore', `cor:${name}`, 'snap0');
  t.is((await corral.request('GET', `/1.0/instances/${name}/files?path=/root/marker`)).body, 'first\n');
});

interop('lxc copy cor:c ref:c sends a stopped corral container with its snapshot; it starts on the reference', async (t) => {
  const name = `h17migr-c-${suffix}`;
  await ok(t, 'init', 'cor:bb', `cor:${name}`, '-c', 'user.from=corral');
  await corral.request('POST', `/1.0/instances/${name}/files?path=/root/marker`, Buffer.from('early\n'), octet);
  await ok(t, 'snapshot', `cor:${name}`, 'snap0');
  await corral.request('POST', `/1.0/instances/${name}/files?path=/root/marker`, Buffer.from('late\n'), octet);

  await ok(t, 'copy', `cor:${name}`, `ref:${name}`);
  const inst = (await ref.request('GET', `/1.0/instances/${name}`)).json.metadata;
  t.is(inst.config['user.from'], 'corral');
  t.deepEqual((await ref.request('GET', `/1.0/instances/${name}/snapshots`)).json.metadata, [`/1.0/instances/${name}/snapshots/snap0`]);
  t.is((await ref.request('GET', `/1.0/instances/${name}/files?path=/root/marker`)).body, 'late\n');
  const started = await ref.lxc('start', name);
  t.is(started.status, 0, `${started.stderr}\n${ref.log().slice(-3000)}`);
  t.is((await ref.lxc('exec', name, '--', 'cat', '/root/marker')).stdout, 'late\n');
  t.is((await ref.lxc('delete', '--force', name)).status, 0);
});

interop('a running reference container copied --stateless arrives unshifted: its files and its snapshot\'s are root\'s inside', async (t) => {
  const name = `h17migr-s-${suffix}`;
  t.is((await ref.lxc('init', 'bb', name)).status, 0, ref.log());
  await ref.request('POST', `/1.0/instances/${name}/files?path=/root/marker`, Buffer.from('shifted\n'), octet);
  // Started, the reference shifts the files to host ids on disk; the snapshot taken then is shifted too.
  t.is((await ref.lxc('start', name)).status, 0, ref.log());
  t.is((await ref.lxc('snapshot', name, 'running')).status, 0);
  const idmap = (await ref.request('GET', `/1.0/instances/${name}`)).json.metadata.config['volatile.last_state.idmap'];
  t.not(idmap, '[]', 'the reference shifted the files on disk');

  // A running instance sent stateless: the volume comes twice, the second time after the source stopped it.
  await ok(t, 'copy', `ref:${name}`, `cor:${name}`, '--stateless');
  await ok(t, 'start', `cor:${name}`);
  t.is(await ok(t, 'exec', `cor:${name}`, '--', 'stat', '-c', '%u:%g', '/root/marker', '/bin/busybox'), '0:0\n0:0\n');
  await ok(t, 'stop', `cor:${name}`, '--force');
  await ok(t, 'restore', `cor:${name}`, 'running');
  await ok(t, 'start', `cor:${name}`);
  t.is(await ok(t, 'exec', `cor:${name}`, '--', 'stat', '-c', '%u:%g', '/root/marker'), '0:0\n');
  await ok(t, 'stop', `cor:${name}`, '--force');
  t.is((await ref.lxc('delete', '--force', name)).status, 0);
});

interop('a running corral container copied --stateless to the reference: the volume goes twice, as the reference expects', async (t) => {
  const name = `h17migr-cr-${suffix}`;
  await ok(t, 'launch', 'cor:bb', `cor:${name}`);
  try {
    await ok(t, 'exec', `cor:${name}`, '--', 'sh', '-c', 'echo running > /root/marker');
    await ok(t, 'copy', `cor:${name}`, `ref:${name}`, '--stateless');
    t.is((await ref.request('GET', `/1.0/instances/${name}/files?path=/root/marker`)).body, 'running\n');
    const started = await ref.lxc('start', name);
    t.is(started.status, 0, `${started.stderr}\n${ref.log().slice(-3000)}`);
    t.is((await ref.lxc('exec', name, '--', 'cat', '/root/marker')).stdout, 'running\n');
  } finally {
    await ref.lxc('delete', '--force', name);
    await remoteLxc('delete', '--force', `cor:${name}`);
  }
});

interop('push and relay modes both ways between the reference and corral', async (t) => {
  const fromRef = `h17migr-pr-${suffix}`;
  t.is((await ref.lxc('init', 'bb', fromRef)).status, 0, ref.log());
  await ref.request('POST', `/1.0/instances/${fromRef}/files?path=/root/marker`, Buffer.from('pushed by the reference\n'), octet);
  const fromCorral = `h17migr-pc-${suffix}`;
  await ok(t, 'init', 'cor:bb', `cor:${fromCorral}`);
  await corral.request('POST', `/1.0/instances/${fromCorral}/files?path=/root/marker`, Buffer.from('pushed by corral\n'), octet);
  try {
    for (const mode of ['push', 'relay']) {
      await ok(t, 'copy', `ref:${fromRef}`, `cor:${fromRef}-${mode}`, '--mode', mode);
      t.is((await corral.request('GET', `/1.0/instances/${fromRef}-${mode}/files?path=/root/marker`)).body, 'pushed by the reference\n', mode);
      await ok(t, 'copy', `cor:${fromCorral}`, `ref:${fromCorral}-${mode}`, '--mode', mode);
      t.is((await ref.request('GET', `/1.0/instances/${fromCorral}-${mode}/files?path=/root/marker`)).body, 'pushed by corral\n', mode);
    }
  } finally {
    for (const mode of ['push', 'relay']) {
      await ref.lxc('delete', '--force', `${fromCorral}-${mode}`);
      await remoteLxc('delete', '--force', `cor:${fromRef}-${mode}`);
    }
    await ref.lxc('delete', '--force', fromRef);
  }
});

interop('lxc copy --refresh both ways with the reference: only the new snapshot and the changes travel', async (t) => {
  const fromRef = `h17migr-rf-${suffix}`;
  t.is((await ref.lxc('init', 'bb', fromRef)).status, 0, ref.log());
  await ref.request('POST', `/1.0/instances/${fromRef}/files?path=/root/marker`, Buffer.from('v1\n'), octet);
  t.is((await ref.lxc('snapshot', fromRef, 'a')).status, 0);
  const fromCorral = `h17migr-cf-${suffix}`;
  await ok(t, 'init', 'cor:bb', `cor:${fromCorral}`);
  await corral.request('POST', `/1.0/instances/${fromCorral}/files?path=/root/marker`, Buffer.from('v1\n'), octet);
  await ok(t, 'snapshot', `cor:${fromCorral}`, 'a');
  try {
    await ok(t, 'copy', `ref:${fromRef}`, `cor:${fromRef}`);
    await ok(t, 'copy', `cor:${fromCorral}`, `ref:${fromCorral}`);
    await ref.request('POST', `/1.0/instances/${fromRef}/files?path=/root/marker`, Buffer.from('v2\n'), octet);
    t.is((await ref.lxc('snapshot', fromRef, 'b')).status, 0);
    await corral.request('POST', `/1.0/instances/${fromCorral}/files?path=/root/marker`, Buffer.from('v2\n'), octet);
    await ok(t, 'snapshot', `cor:${fromCorral}`, 'b');

    await ok(t, 'copy', `ref:${fromRef}`, `cor:${fromRef}`, '--refresh');
    t.is((await corral.request('GET', `/1.0/instances/${fromRef}/files?path=/root/marker`)).body, 'v2\n');
    t.deepEqual((await corral.request('GET', `/1.0/instances/${fromRef}/snapshots`)).json.metadata.sort(), [`/1.0/instances/${fromRef}/snapshots/a`, `/1.0/instances/${fromRef}/snapshots/b`]);
    await ok(t, 'copy', `cor:${fromCorral}`, `ref:${fromCorral}`, '--refresh');
    t.is((await ref.request('GET', `/1.0/instances/${fromCorral}/files?path=/root/marker`)).body, 'v2\n');
    t.deepEqual((await ref.request('GET', `/1.0/instances/${fromCorral}/snapshots`)).json.metadata.sort(), [`/1.0/instances/${fromCorral}/snapshots/a`, `/1.0/instances/${fromCorral}/snapshots/b`]);
  } finally {
    await ref.lxc('delete', '--force', fromRef);
    await ref.lxc('delete', '--force', fromCorral);
    await remoteLxc('delete', '--force', `cor:${fromRef}`);
    await remoteLxc('delete', '--force', `cor:${fromCorral}`);
  }
});
