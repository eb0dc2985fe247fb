/**
 * A snapshot copied between corral and the private reference daemon (LXD 5.0.2) with the real `lxc`, both
 * ways, in pull and push modes: corral's snapshot migration source speaks to the reference's target, and
 * the reference's to corral's. The migration source's operation has the reference's shape.
 */
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { RemoteClient } from '../helpers/remotes.js';
import { startReferencePair, stopReferencePair } from '../helpers/reference-pair.js';
import type { ImageDaemon } from '../helpers/image-daemon.js';
import { referenceUnavailable, type ReferenceDaemon } from '../helpers/reference-daemon.js';

const missing = referenceUnavailable();
const interop = missing ? test.skip : test.serial;
if (missing) console.warn(`Skipping the reference snapshot migration tests: ${missing}`);

const PASSWORD = 'snap-ref-13';
const client = new RemoteClient(PASSWORD);
const { ok } = client;
client.describeFailure = () => `\n${ref?.log().slice(-3000) ?? ''}`;
const octet = { 'content-type': 'application/octet-stream' };
const suffix = randomBytes(3).toString('hex');
let corral: ImageDaemon;
let ref: ReferenceDaemon;

test.before(async () => {
  if (missing) return;
  ({ corral, ref } = await startReferencePair(client, '127.19.13.3', '127.19.13.4'));
});

test.after.always(() => stopReferencePair({ corral, ref }, client));

/** What a snapshot migration source's operation looks like, for comparing the two daemons. */
function shape(op: any) {
  return {
    class: op.class, description: op.description, status: op.status, may_cancel: op.may_cancel,
    secrets: Object.keys(op.metadata ?? {}).sort(), resources: Object.keys(op.resources ?? {}).sort(),
  };
}

interop('the snapshot migration source answers with the reference\'s operation', async (t) => {
  const name = `h19snap-o-${suffix}`;
  t.is((await ref.lxc('init', 'bb', name)).status, 0, ref.log());
  t.is((await ref.lxc('snapshot', name, 'snap0')).status, 0);
  await ok(t, 'init', 'cor:bb', `cor:${name}`);
  await ok(t, 'snapshot', `cor:${name}`, 'snap0');
  // Without the name of the instance to be: both refuse.
  const unnamedTheirs = await ref.request('POST', `/1.0/instances/${name}/snapshots/snap0`, { migration: true });
  const unnamedOurs = await corral.request('POST', `/1.0/instances/${name}/snapshots/snap0`, { migration: true });
  t.is(unnamedOurs.status, unnamedTheirs.status);
  t.is(unnamedOurs.json.error_code, 400);
  const theirs = await ref.request('POST', `/1.0/instances/${name}/snapshots/snap0`, { migration: true, name: 'copied' });
  const ours = await corral.request('POST', `/1.0/instances/${name}/snapshots/snap0`, { migration: true, name: 'copied' });
  t.is(ours.status, theirs.status, JSON.stringify(theirs.json));
  t.deepEqual(shape(ours.json.metadata), shape(theirs.json.metadata));
  await ref.request('DELETE', `/1.0/operations/${theirs.json.metadata.id}`);
  await corral.request('DELETE', `/1.0/operations/${ours.json.metadata.id}`);
  // An unknown snapshot: both 404.
  const missingTheirs = await ref.request('POST', `/1.0/instances/${name}/snapshots/nope`, { migration: true, name: 'copied' });
  const missingOurs = await corral.request('POST', `/1.0/instances/${name}/snapshots/nope`, { migration: true, name: 'copied' });
  t.is(missingOurs.status, missingTheirs.status);
  await ref.lxc('delete', '--force', name);
  await ok(t, 'delete', `cor:${name}`);
});

interop('lxc copy of a snapshot both ways between the reference and corral, pull and push', async (t) => {
  const fromRef = `h19snap-r-${suffix}`;
  t.is((await ref.lxc('init', 'bb', fromRef, '-c', 'user.at=snap')).status, 0, ref.log());
  await ref.request('POST', `/1.0/instances/${fromRef}/files?path=/root/marker`, Buffer.from('ref snap\n'), octet);
  t.is((await ref.lxc('snapshot', fromRef, 'snap0')).status, 0);
  await ref.request('POST', `/1.0/instances/${fromRef}/files?path=/root/marker`, Buffer.from('ref now\n'), octet);
  const fromCorral = `h19snap-c-${suffix}`;
  await ok(t, 'init', 'cor:bb', `cor:${fromCorral}`, '-c', 'user.at=snap');
  await corral.request('POST', `/1.0/instances/${fromCorral}/files?path=/root/marker`, Buffer.from('corral snap\n'), octet);
  await ok(t, 'snapshot', `cor:${fromCorral}`, 'snap0');
  await corral.request('POST', `/1.0/instances/${fromCorral}/files?path=/root/marker`, Buffer.from('corral now\n'), octet);
  try {
    for (const mode of ['pull', 'push']) {
      await ok(t, 'copy', `ref:${fromRef}/snap0`, `cor:${fromRef}-${mode}`, '--mode', mode);
      t.is((await corral.request('GET', `/1.0/instances/${fromRef}-${mode}/files?path=/root/marker`)).body, 'ref snap\n', mode);
      t.deepEqual((await corral.request('GET', `/1.0/instances/${fromRef}-${mode}/snapshots`)).json.metadata, []);
      await ok(t, 'copy', `cor:${fromCorral}/snap0`, `ref:${fromCorral}-${mode}`, '--mode', mode);
      t.is((await ref.request('GET', `/1.0/instances/${fromCorral}-${mode}/files?path=/root/marker`)).body, 'corral snap\n', mode);
      t.deepEqual((await ref.request('GET', `/1.0/instances/${fromCorral}-${mode}/snapshots`)).json.metadata, []);
      t.is((await ref.request('GET', `/1.0/instances/${fromCorral}-${mode}`)).json.metadata.config['user.at'], 'snap');
    }
    const started = await ref.lxc('start', `${fromCorral}-pull`);
    t.is(started.status, 0, `${started.stderr}\n${ref.log().slice(-3000)}`);
    t.is((await ref.lxc('exec', `${fromCorral}-pull`, '--', 'cat', '/root/marker')).stdout, 'corral snap\n');
  } finally {
    for (const mode of ['pull', 'push']) {
      await ref.lxc('delete', '--force', `${fromCorral}-${mode}`);
      await client.lxc('delete', '--force', `cor:${fromRef}-${mode}`);
    }
    await ref.lxc('delete', '--force', fromRef);
    await client.lxc('delete', `cor:${fromCorral}`);
  }
});
