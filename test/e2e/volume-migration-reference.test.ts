/**
 * Custom volume migration between corral and a private reference daemon (LXD 5.0.2), both over HTTPS
 * on loopback with `dir` pools, with the real `lxc` as the go-between: `lxc storage volume copy` both
 * ways in pull, push and relay modes carries the volume's files, its snapshots with theirs, config
 * and description; `--refresh` both ways brings only the new snapshot and the changed files. A
 * reference volume written by a container (shifted on disk) arrives at container ids and is used by a
 * corral container, and goes back.
 */
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { RemoteClient } from '../helpers/remotes.js';
import { startReferencePair, stopReferencePair } from '../helpers/reference-pair.js';
import type { ImageDaemon } from '../helpers/image-daemon.js';
import { referenceUnavailable, type ReferenceDaemon } from '../helpers/reference-daemon.js';

const missing = referenceUnavailable();
const interop = missing ? test.skip : test.serial;
if (missing) console.warn(`Skipping the reference volume migration tests: ${missing}`);

const PASSWORD = 'vol-migr-ref-43';
const client = new RemoteClient(PASSWORD);
const { ok } = client;
client.describeFailure = () => `\n${ref?.log().slice(-3000) ?? ''}`;
const suffix = randomBytes(3).toString('hex');
let corral: ImageDaemon;
let ref: ReferenceDaemon;

/** Both daemons lay a `dir` pool out alike: `custom/<project>_<name>` and `custom-snapshots/<project>_<name>/<snapshot>`. */
function volumeDir(dataDir: string, name: string, snapshot?: string): string {
  const pool = path.join(dataDir, 'storage-pools', 'default');
  return snapshot ? path.join(pool, 'custom-snapshots', `default_${name}`, snapshot) : path.join(pool, 'custom', `default_${name}`);
}

const marker = (dataDir: string, name: string, snapshot?: string) => readFileSync(path.join(volumeDir(dataDir, name, snapshot), 'data', 'marker'), 'utf8');

/** Distinct modification times per write: rsync's quick check (size and time, to the second on the reference's receiver) must see each change. */
let writes = 0;

function writeMarker(dataDir: string, name: string, content: string): void {
  const dir = path.join(volumeDir(dataDir, name), 'data');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'marker');
  writeFileSync(file, content);
  const when = Math.floor(Date.now() / 1000) - 10_000 + 10 * ++writes;
  utimesSync(file, when, when);
}

/** A volume `name` on `remote` (its daemon's data dir `dataDir`) with snapshots s1 ("one"), s2 ("two"), and "three" as its own content. */
async function makeVolume(t: any, remote: string, dataDir: string, name: string): Promise<void> {
  await ok(t, 'storage', 'volume', 'create', `${remote}:default`, name, 'user.colour=green');
  await ok(t, 'query', '-X', 'PUT', '-d', JSON.stringify({ description: 'carried along', config: { 'user.colour': 'green' } }), `${remote}:/1.0/storage-pools/default/volumes/custom/${name}`);
  for (const [content, snapshot] of [['one', 's1'], ['two', 's2'], ['three', undefined]] as const) {
    writeMarker(dataDir, name, content);
    if (snapshot) await ok(t, 'storage', 'volume', 'snapshot', `${remote}:default`, name, snapshot);
  }
}

/** The copy `name` on `remote` holds what makeVolume made. */
async function sameVolume(t: any, remote: string, dataDir: string, name: string, snapshots = ['s1', 's2']): Promise<void> {
  t.is(marker(dataDir, name), 'three');
  const listed = JSON.parse(await ok(t, 'query', `${remote}:/1.0/storage-pools/default/volumes/custom/${name}/snapshots`)).map((u: string) => decodeURIComponent(u.split('/').pop()!));
  t.deepEqual(listed.sort(), snapshots);
  for (const [snapshot, content] of [['s1', 'one'], ['s2', 'two']]) if (snapshots.includes(snapshot!)) t.is(marker(dataDir, name, snapshot), content);
  const vol = JSON.parse(await ok(t, 'query', `${remote}:/1.0/storage-pools/default/volumes/custom/${name}`));
  t.is(vol.config['user.colour'], 'green');
  t.is(vol.description, 'carried along');
  t.is(vol.content_type, 'filesystem');
  t.deepEqual(readdirSync(path.dirname(volumeDir(dataDir, name))).filter((n) => n.includes('partial')), [], 'no scratch volume left');
}

test.before(async () => {
  if (missing) return;
  ({ corral, ref } = await startReferencePair(client, '127.0.43.3', '127.0.43.4'));
});

test.after.always(() => stopReferencePair({ corral, ref }, client));

for (const mode of ['pull', 'push', 'relay'] as const) {
  interop(`lxc storage volume copy ref:default/v cor:default/v (${mode}) brings a reference volume with its snapshots, config and description`, async (t) => {
    const name = `hvol-r-${mode}-${suffix}`;
    await makeVolume(t, 'ref', ref.dir, name);
    await ok(t, 'storage', 'volume', 'copy', `ref:default/${name}`, `cor:default/${name}`, '--mode', mode);
    await sameVolume(t, 'cor', corral.dir, name);
    const original = JSON.parse(await ok(t, 'query', `ref:/1.0/storage-pools/default/volumes/custom/${name}/snapshots/s1`));
    const copied = JSON.parse(await ok(t, 'query', `cor:/1.0/storage-pools/default/volumes/custom/${name}/snapshots/s1`));
    // The reference shows no creation time for its volume snapshots (the zero time) and sends 0: corral's copy then shows when it was made.
    if (!original.created_at.startsWith('0001-')) t.is(copied.created_at.slice(0, 19), original.created_at.slice(0, 19), 'the snapshot keeps its creation time');
    else t.false(copied.created_at.startsWith('0001-'));
    t.is(copied.description, 'carried along', 'as the reference does, a received snapshot takes the volume\'s description');
    t.is(marker(ref.dir, name), 'three', 'the source is untouched');
  });

  interop(`lxc storage volume copy cor:default/v ref:default/v (${mode}) gives the reference a corral volume with its snapshots, config and description`, async (t) => {
    const name = `hvol-c-${mode}-${suffix}`;
    await makeVolume(t, 'cor', corral.dir, name);
    await ok(t, 'storage', 'volume', 'copy', `cor:default/${name}`, `ref:default/${name}`, '--mode', mode);
    await sameVolume(t, 'ref', ref.dir, name);
    t.is(marker(corral.dir, name), 'three', 'the source is untouched');
  });
}

interop('lxc storage volume copy --volume-only both ways leaves the snapshots behind', async (t) => {
  const name = `hvol-vo-${suffix}`;
  await makeVolume(t, 'ref', ref.dir, name);
  await ok(t, 'storage', 'volume', 'copy', `ref:default/${name}`, `cor:default/${name}`, '--volume-only');
  await sameVolume(t, 'cor', corral.dir, name, []);
  await ok(t, 'storage', 'volume', 'copy', `cor:default/${name}`, `ref:default/${name}-back`, '--volume-only');
  await sameVolume(t, 'ref', ref.dir, `${name}-back`, []);
});

interop('lxc storage volume copy --refresh both ways brings the new snapshot and the changed files', async (t) => {
  for (const [from, fromDir, to, toDir] of [['ref', () => ref.dir, 'cor', () => corral.dir], ['cor', () => corral.dir, 'ref', () => ref.dir]] as const) {
    const name = `hvol-rf-${from}-${suffix}`;
    await makeVolume(t, from, fromDir(), name);
    await ok(t, 'storage', 'volume', 'copy', `${from}:default/${name}`, `${to}:default/${name}`);
    writeMarker(fromDir(), name, 'four');
    await ok(t, 'storage', 'volume', 'snapshot', `${from}:default`, name, 's3');
    await ok(t, 'storage', 'volume', 'copy', `${from}:default/${name}`, `${to}:default/${name}`, '--refresh');
    t.is(marker(toDir(), name), 'four', `${from} → ${to}: the changed file`);
    t.is(marker(toDir(), name, 's3'), 'four', `${from} → ${to}: the new snapshot`);
    t.is(marker(toDir(), name, 's1'), 'one');
    const listed = JSON.parse(await ok(t, 'query', `${to}:/1.0/storage-pools/default/volumes/custom/${name}/snapshots`)).map((u: string) => u.split('/').pop());
    t.deepEqual(listed.sort(), ['s1', 's2', 's3']);
  }
});

interop('lxc storage volume move across remotes both ways: the source is gone', async (t) => {
  const name = `hvol-mv-${suffix}`;
  await makeVolume(t, 'ref', ref.dir, name);
  await ok(t, 'storage', 'volume', 'move', `ref:default/${name}`, `cor:default/${name}`);
  await sameVolume(t, 'cor', corral.dir, name);
  t.is((await ref.request('GET', `/1.0/storage-pools/default/volumes/custom/${name}`)).status, 404);
  await ok(t, 'storage', 'volume', 'move', `cor:default/${name}`, `ref:default/${name}`);
  await sameVolume(t, 'ref', ref.dir, name);
  t.is((await corral.request('GET', `/1.0/storage-pools/default/volumes/custom/${name}`)).status, 404);
  t.false(existsSync(volumeDir(corral.dir, name)));
});

interop('a reference volume a container wrote to (shifted on disk, volatile.idmap.last) arrives at container ids, serves a corral container, and goes back', async (t) => {
  const name = `hvol-sh-${suffix}`;
  const inst = `hvol-c-${suffix}`;
  await ok(t, 'storage', 'volume', 'create', 'ref:default', name);
  await ok(t, 'init', 'ref:bb', `ref:${inst}`);
  await ok(t, 'storage', 'volume', 'attach', 'ref:default', name, inst, '/mnt/v');
  await ok(t, 'start', `ref:${inst}`);
  await ok(t, 'exec', `ref:${inst}`, '--', 'sh', '-c', 'echo first > /mnt/v/file; mkdir /mnt/v/d; chown 1000:1000 /mnt/v/d');
  await ok(t, 'storage', 'volume', 'snapshot', 'ref:default', name, 'snap');
  await ok(t, 'exec', `ref:${inst}`, '--', 'sh', '-c', 'echo second > /mnt/v/file');
  await ok(t, 'stop', `ref:${inst}`, '--force');
  const shifted = JSON.parse(await ok(t, 'query', `ref:/1.0/storage-pools/default/volumes/custom/${name}`));
  t.truthy(shifted.config['volatile.idmap.last'], 'the reference shifted the volume on disk');
  t.not(statSync(path.join(volumeDir(ref.dir, name), 'd')).uid, 1000);

  await ok(t, 'storage', 'volume', 'copy', `ref:default/${name}`, `cor:default/${name}`);
  const here = volumeDir(corral.dir, name);
  t.is(statSync(path.join(here, 'd')).uid, 1000, 'shifted back to the container\'s ids');
  t.is(statSync(path.join(here, 'file')).uid, 0);
  t.is(statSync(path.join(volumeDir(corral.dir, name, 'snap'), 'd')).gid, 1000, 'the snapshot too');
  t.is(readFileSync(path.join(volumeDir(corral.dir, name, 'snap'), 'file'), 'utf8'), 'first\n');
  const vol = JSON.parse(await ok(t, 'query', `cor:/1.0/storage-pools/default/volumes/custom/${name}`));
  t.deepEqual(Object.keys(vol.config).filter((k) => k.startsWith('volatile.')), [], 'the source\'s volatile keys are not kept');

  await ok(t, 'init', 'cor:bb', `cor:${inst}`);
  await ok(t, 'storage', 'volume', 'attach', 'cor:default', name, inst, '/mnt/v');
  await ok(t, 'start', `cor:${inst}`);
  t.is(await ok(t, 'exec', `cor:${inst}`, '--', 'cat', '/mnt/v/file'), 'second\n');
  t.is((await ok(t, 'exec', `cor:${inst}`, '--', 'stat', '-c', '%u:%g', '/mnt/v/d')).trim(), '1000:1000');
  await ok(t, 'stop', `cor:${inst}`, '--force');

  // Back to the reference, under another name: it shifts the volume when a container attaches it.
  await ok(t, 'storage', 'volume', 'copy', `cor:default/${name}`, `ref:default/${name}-back`);
  await ok(t, 'storage', 'volume', 'detach', 'ref:default', name, inst);
  await ok(t, 'storage', 'volume', 'attach', 'ref:default', `${name}-back`, inst, '/mnt/v');
  await ok(t, 'start', `ref:${inst}`);
  t.is(await ok(t, 'exec', `ref:${inst}`, '--', 'cat', '/mnt/v/file'), 'second\n');
  t.is((await ok(t, 'exec', `ref:${inst}`, '--', 'stat', '-c', '%u:%g', '/mnt/v/d')).trim(), '1000:1000');
  await ok(t, 'stop', `ref:${inst}`, '--force');
});
