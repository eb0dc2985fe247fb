/**
 * When corral receives trees by rsync (dir pools), the snapshots' trees and the instance's (or the
 * volume's) arrive over the tree before them, as the reference receives them: only the first tree
 * comes over whole, the later ones as deltas. Checked through the real `lxc` with corral's debug log
 * (the bytes each tree took on the fs socket), for corral -> corral instances and custom volumes and
 * for a reference -> corral instance; a file deleted between snapshots must still be gone in the later
 * trees, and a file the same in every tree must be the same in each copy.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { killContainers, startWithPool, type Daemon } from '../helpers/daemon.js';
import { startWithImage, stopImageDaemons, type ImageDaemon } from '../helpers/image-daemon.js';
import { collectRun, type ClientRun } from '../helpers/clients.js';
import { freePort } from '../helpers/tls-client.js';
import { referenceUnavailable, startReference, type ReferenceDaemon } from '../helpers/reference-daemon.js';

const PASSWORD = 'deltas-46';
const octet = { 'content-type': 'application/octet-stream' };
/** Random, so rsync's compression cannot shrink it: a whole tree costs at least this much on the wire. */
const BIG = 3 * 1024 * 1024;
/** What a tree that differs by a few small files may take (file list, checksums, the changed files). */
const DELTA_MAX = 512 * 1024;
const missingReference = referenceUnavailable();
const suffix = randomBytes(3).toString('hex');

let source: ImageDaemon;
let target: Daemon;
let ref: ReferenceDaemon | undefined;
let home = '';
const noop = { is: () => {} };

function remoteLxc(...args: string[]): Promise<ClientRun> {
  const { LXD_SOCKET: _s, LXD_DIR: _d, ...env } = process.env;
  const child = spawn('lxc', args, { env: { ...env, LXD_CONF: home, HOME: home } });
  child.stdin.end();
  return collectRun(child, 300_000);
}

async function ok(t: { is: (a: unknown, b: unknown, m?: string) => void }, ...args: string[]): Promise<string> {
  const res = await remoteLxc(...args);
  t.is(res.status, 0, `lxc ${args.join(' ')}: ${res.stderr}`);
  return res.stdout;
}

async function listen(daemon: Pick<Daemon, 'request'>, address: string): Promise<string> {
  const port = await freePort();
  const set = await daemon.request('PATCH', '/1.0', { config: { 'core.https_address': `${address}:${port}`, 'core.trust_password': PASSWORD } });
  if (set.status !== 200) throw new Error(`https listener: ${set.body}`);
  return `https://${address}:${port}`;
}

/** Run `lxc args` with the target at debug level; answers the bytes each received tree took, in order. */
async function treesOfCopy(t: any, ...args: string[]): Promise<{ tree: string; bytes: number }[]> {
  await ok(t, 'config', 'set', 'r2:', 'core.log_level', 'debug');
  const from = target.output().length;
  try {
    await ok(t, ...args);
  } finally {
    await remoteLxc('config', 'unset', 'r2:', 'core.log_level');
  }
  return target.output().slice(from).split('\n').filter((l) => l.includes('"migration tree received"')).map((l) => JSON.parse(l));
}

/** The first tree whole, every later one a delta. */
function checkDeltas(t: any, trees: { tree: string; bytes: number }[], names: string[]): void {
  t.log(trees.map((x) => `${x.tree || '(main)'}: ${x.bytes} B`).join(', '));
  // The main tree, then a final sync when the source asks for one (a stopped container may or may not).
  const order = trees.map((x) => x.tree);
  t.deepEqual(order.slice(0, names.length + 1), [...names, ''], 'each snapshot\'s tree, then the main tree');
  t.true(order.length <= names.length + 2 && order.slice(names.length).every((x) => x === ''), order.join(','));
  t.true(trees[0]!.bytes >= BIG, `the first tree comes whole (${trees[0]!.bytes} B)`);
  for (const x of trees.slice(1)) t.true(x.bytes < DELTA_MAX, `tree ${x.tree || '(main)'} took ${x.bytes} B: a delta, not the whole tree`);
}

const sha = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');
const pool = (daemon: { dir: string }) => path.join(daemon.dir, 'storage-pools', readdirSync(path.join(daemon.dir, 'storage-pools'))[0]!);
const instanceDir = (name: string, snapshot?: string) => (snapshot ? path.join(pool(target), 'containers-snapshots', name, snapshot) : path.join(pool(target), 'containers', name));
const staging = (kind: string) => readdirSync(path.join(pool(target), kind)).filter((n) => n.startsWith('.migrating-') || n.includes('..partial-'));

/** The files of a copied container c with snapshots s1..s3 (gone deleted after s1, big the same throughout). */
function checkInstanceFiles(t: any, name: string, rootOf: (dir: string) => string, bigSha: string): void {
  const trees: [string | undefined, string][] = [['s1', 'one'], ['s2', 'two'], ['s3', 'three'], [undefined, 'four']];
  for (const [snapshot, marker] of trees) {
    const root = rootOf(instanceDir(name, snapshot));
    t.is(readFileSync(path.join(root, 'marker'), 'utf8'), marker, `marker of ${snapshot ?? 'the instance'}`);
    t.is(sha(path.join(root, 'big.bin')), bigSha, `big.bin of ${snapshot ?? 'the instance'} is the source's`);
    t.is(existsSync(path.join(root, 'gone')), snapshot === 's1', `"gone" only in s1 (${snapshot ?? 'the instance'})`);
  }
  t.deepEqual(staging('containers'), [], 'no staging directory left');
}

test.before(async () => {
  [source, target] = await Promise.all([startWithImage({ plugins: 'full' }), startWithPool({ plugins: 'full' })]);
  home = mkdtempSync(path.join(tmpdir(), 'corral-deltas-home-'));
  const [u1, u2] = await Promise.all([listen(source, '127.0.46.1'), listen(target, '127.0.46.2')]);
  for (const [name, url] of [['r1', u1], ['r2', u2]] as const) {
    const res = await remoteLxc('remote', 'add', name, url, '--password', PASSWORD, '--accept-certificate');
    if (res.status !== 0) throw new Error(`remote add ${name}: ${res.stderr}`);
  }
});

test.after.always(async () => {
  await ref?.stop();
  if (target) killContainers(target.dir);
  await stopImageDaemons();
  if (home) rmSync(home, { recursive: true, force: true });
});

/** Fill instance `name` on a daemon through its files API: s1 with big.bin and gone, s2 without gone, s3, then the instance's own marker. */
async function snapshotSeries(request: Daemon['request'], snapshot: (s: string) => Promise<void>, name: string, big: Buffer): Promise<void> {
  const put = async (file: string, body: Buffer) => {
    const res = await request('POST', `/1.0/instances/${name}/files?path=/root/${file}`, body, octet);
    if (res.status !== 200) throw new Error(`file push ${file}: ${res.body}`);
  };
  await put('big.bin', big);
  await put('gone', Buffer.from('x'));
  await put('marker', Buffer.from('one'));
  await snapshot('s1');
  const removed = await request('DELETE', `/1.0/instances/${name}/files?path=/root/gone`);
  if (removed.status !== 200) throw new Error(`file delete: ${removed.body}`);
  await put('marker', Buffer.from('two'));
  await snapshot('s2');
  await put('marker', Buffer.from('three'));
  await snapshot('s3');
  await put('marker', Buffer.from('four'));
}

test.serial('lxc copy r1:c r2:c (dir pools): trees 2..N of a container with 3 snapshots come over as deltas; deletes are honoured', async (t) => {
  const big = randomBytes(BIG);
  await ok(t, 'init', 'r1:bb', 'r1:c1');
  await snapshotSeries(source.request, (s) => ok(noop, 'snapshot', 'r1:c1', s).then(() => {}), 'c1', big);
  const trees = await treesOfCopy(t, 'copy', 'r1:c1', 'r2:c1');
  checkDeltas(t, trees, ['s1', 's2', 's3']);
  checkInstanceFiles(t, 'c1', (dir) => path.join(dir, 'rootfs', 'root'), sha(path.join(pool(source), 'containers', 'c1', 'rootfs', 'root', 'big.bin')));
  const names = JSON.parse(await ok(t, 'query', 'r2:/1.0/instances/c1/snapshots?recursion=1')).map((s: any) => s.name);
  t.deepEqual(names, ['s1', 's2', 's3']);
  // The copy is whole: it starts and holds the instance's own file.
  await ok(t, 'start', 'r2:c1');
  t.is(await ok(t, 'exec', 'r2:c1', '--', 'cat', '/root/marker'), 'four');
  await ok(t, 'stop', 'r2:c1', '--force');
});

test.serial('lxc copy --instance-only: the snapshots\' trees are not kept, the instance is whole', async (t) => {
  const trees = await treesOfCopy(t, 'copy', 'r1:c1', 'r2:c2', '--instance-only');
  t.true(trees.length >= 1 && trees.every((x) => x.tree === ''), 'only the instance\'s tree: no snapshot is received');
  const root = path.join(instanceDir('c2'), 'rootfs', 'root');
  t.is(readFileSync(path.join(root, 'marker'), 'utf8'), 'four');
  t.false(existsSync(path.join(root, 'gone')));
  t.deepEqual(JSON.parse(await ok(t, 'query', 'r2:/1.0/instances/c2/snapshots')), []);
  t.deepEqual(staging('containers'), []);
});

test.serial('lxc storage volume copy r1:default/v r2:default/v: trees 2..N of a custom volume come over as deltas; deletes are honoured', async (t) => {
  await ok(t, 'storage', 'volume', 'create', 'r1:default', 'v1');
  const volume = path.join(pool(source), 'custom', 'default_v1');
  const big = randomBytes(BIG);
  mkdirSync(path.join(volume, 'data'), { recursive: true });
  writeFileSync(path.join(volume, 'data', 'big.bin'), big);
  writeFileSync(path.join(volume, 'data', 'gone'), 'x');
  writeFileSync(path.join(volume, 'data', 'marker'), 'one');
  await ok(t, 'storage', 'volume', 'snapshot', 'r1:default', 'v1', 's1');
  rmSync(path.join(volume, 'data', 'gone'));
  writeFileSync(path.join(volume, 'data', 'marker'), 'two');
  await ok(t, 'storage', 'volume', 'snapshot', 'r1:default', 'v1', 's2');
  writeFileSync(path.join(volume, 'data', 'marker'), 'three');
  await ok(t, 'storage', 'volume', 'snapshot', 'r1:default', 'v1', 's3');
  writeFileSync(path.join(volume, 'data', 'marker'), 'four');

  const trees = await treesOfCopy(t, 'storage', 'volume', 'copy', 'r1:default/v1', 'r2:default/v1');
  // A volume has no final sync: its tree comes once.
  t.log(trees.map((x) => `${x.tree || '(main)'}: ${x.bytes} B`).join(', '));
  t.deepEqual(trees.map((x) => x.tree), ['s1', 's2', 's3', '']);
  t.true(trees[0]!.bytes >= BIG);
  for (const x of trees.slice(1)) t.true(x.bytes < DELTA_MAX, `tree ${x.tree || '(main)'} took ${x.bytes} B`);
  const bigSha = createHash('sha256').update(big).digest('hex');
  for (const [snapshot, marker] of [['s1', 'one'], ['s2', 'two'], ['s3', 'three'], [undefined, 'four']] as const) {
    const dir = snapshot ? path.join(pool(target), 'custom-snapshots', 'default_v1', snapshot, 'data') : path.join(pool(target), 'custom', 'default_v1', 'data');
    t.is(readFileSync(path.join(dir, 'marker'), 'utf8'), marker);
    t.is(sha(path.join(dir, 'big.bin')), bigSha);
    t.is(existsSync(path.join(dir, 'gone')), snapshot === 's1', `"gone" only in s1 (${snapshot ?? 'the volume'})`);
  }
  t.deepEqual(staging('custom'), []);
});

const interop = missingReference ? test.skip : test.serial;
if (missingReference) console.warn(`Skipping the reference delta test: ${missingReference}`);

interop('lxc copy ref:c r2:c: a reference container\'s snapshot trees come over as deltas, as between two references', async (t) => {
  ref = await startReference();
  const up = await ref.call('POST', '/1.0/images', readFileSync(source.image.unified), octet);
  t.is(up.op?.status, 'Success', up.op?.err ?? up.body);
  const uref = await listen(ref, '127.0.46.3');
  await ok(t, 'remote', 'add', 'ref', uref, '--password', PASSWORD, '--accept-certificate');
  const name = `hdelta-${suffix}`;
  t.is((await ref.lxc('init', up.op.metadata.fingerprint, name)).status, 0, ref.log());
  const big = randomBytes(BIG);
  await snapshotSeries(ref.request, async (s) => {
    const res = await ref!.lxc('snapshot', name, s);
    if (res.status !== 0) throw new Error(`snapshot ${s}: ${res.stderr}`);
  }, name, big);
  const trees = await treesOfCopy(t, 'copy', `ref:${name}`, `r2:${name}`);
  checkDeltas(t, trees, ['s1', 's2', 's3']);
  checkInstanceFiles(t, name, (dir) => path.join(dir, 'rootfs', 'root'), createHash('sha256').update(big).digest('hex'));
});
