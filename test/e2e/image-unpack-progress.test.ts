/**
 * Progress while an image is unpacked for a new instance (create_instance_from_image_unpack_progress),
 * through the real `lxc` client under a pseudo-terminal (it prints progress only to a terminal with
 * a width) and through the operation events it follows. The image carries 32 MB of random data,
 * so the unpack takes long enough to be seen; the reference (LXD 5.0.2) shows the same keys and line.
 */
import test from 'ava';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { collect, startWithPool, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { lxc, lxcEnv, lxcOk, type ClientRun, collectRun } from '../helpers/clients.js';
import { withLxcClient } from '../helpers/needs.js';

const lxcTest = withLxcClient();

const STAGE = 'create_instance_from_image_unpack';
const KEY = `${STAGE}_progress`;
/** The reference's line: `Unpack: 42% (57.02MB/s)` (decimal units, two decimals, bytes below 1 kB). */
const LINE = /^Unpack: (\d+)% \((\d+B|\d+\.\d\d[kMGTPE]B)\/s\)$/;
const BIG = 32 << 20;

let d: Daemon;
let work: string;
let tree: string;

/** A rootfs with busybox (enough for `lxc launch` to start it) and `root/big.bin` of random bytes. */
function writeTree(root: string): void {
  for (const dir of ['rootfs/bin', 'rootfs/sbin', 'rootfs/etc', 'rootfs/dev', 'rootfs/proc', 'rootfs/sys', 'rootfs/tmp', 'rootfs/root', 'templates']) {
    mkdirSync(path.join(root, dir), { recursive: true });
  }
  chmodSync(path.join(root, 'rootfs/tmp'), 0o1777);
  execFileSync('cp', ['/bin/busybox', path.join(root, 'rootfs/bin/busybox')]);
  symlinkSync('busybox', path.join(root, 'rootfs/bin/sh'));
  symlinkSync('../bin/busybox', path.join(root, 'rootfs/sbin/init'));
  writeFileSync(path.join(root, 'rootfs/root/big.bin'), randomBytes(BIG));
  writeFileSync(path.join(root, 'metadata.yaml'), `architecture: x86_64\ncreation_date: ${Math.floor(Date.now() / 1000)}\nproperties:\n  description: unpack progress\ntemplates: {}\n`);
}

/** The unified tarball, gzip at its fastest (random data does not shrink anyway); `salt` changes the fingerprint. */
function unifiedImage(name: string, salt: string): string {
  writeFileSync(path.join(tree, 'rootfs/etc/salt'), salt);
  const file = path.join(work, `${name}.tar.gz`);
  execFileSync('tar', ['-c', '-I', 'gzip -1', '--numeric-owner', '-f', file, '-C', tree, 'metadata.yaml', 'templates', 'rootfs']);
  return file;
}

/** lxc under a pseudo-terminal of 160 columns: what a user sees, carriage returns and all. */
function lxcOnTerminal(socket: string, command: string): Promise<ClientRun> {
  const child = spawn('script', ['-q', '-e', '-c', `stty cols 160 rows 40; lxc ${command}`, '/dev/null'], { env: lxcEnv(socket), stdio: ['ignore', 'pipe', 'pipe'] });
  return collectRun(child, 120_000);
}

/** Operation events of the create of `name`, in the order they came. */
const createEvents = (events: any[], name: string) => events
  .map((e) => e.metadata)
  .filter((op) => op.description === 'Creating instance' && op.resources?.instances?.includes(`/1.0/instances/${name}`));

/** The events that carried progress, checked for the reference's shape; returns their percentages. */
function checkProgressEvents(t: any, ops: any[]): { percents: number[]; times: number[] } {
  const shown = ops.filter((op) => op.status === 'Running' && op.metadata?.[KEY]);
  const percents: number[] = [];
  const times: number[] = [];
  for (const op of shown) {
    const m = LINE.exec(op.metadata[KEY]);
    t.truthy(m, `progress line "${op.metadata[KEY]}"`);
    t.deepEqual(Object.keys(op.metadata.progress).sort(), ['percent', 'speed', 'stage']);
    t.is(op.metadata.progress.stage, STAGE);
    t.is(op.metadata.progress.percent, m?.[1]);
    t.regex(op.metadata.progress.speed, /^\d+$/);
    percents.push(Number(m?.[1]));
    times.push(Date.parse(op.updated_at));
  }
  return { percents, times };
}

test.before(async () => {
  work = mkdtempSync(path.join(tmpdir(), 'corral-unpack-'));
  tree = path.join(work, 'tree');
  writeTree(tree);
  d = await startWithPool({ plugins: 'full' });
});

test.after.always(async () => {
  if (d) {
    const list = await lxc(d.socket, 'list', '--format', 'json').catch(() => undefined);
    for (const c of JSON.parse(list?.stdout || '[]')) await lxc(d.socket, 'delete', '--force', c.name);
    for (const p of JSON.parse((await lxc(d.socket, 'storage', 'list', '--format', 'json')).stdout || '[]')) {
      if (p.name !== 'default') await lxc(d.socket, 'storage', 'delete', p.name);
    }
  }
  await stopDaemons();
  if (work) rmSync(work, { recursive: true, force: true });
});

lxcTest('lxc launch shows "Retrieving image: Unpack: NN%" while the image is unpacked into a dir pool (create_instance_from_image_unpack_progress)', async (t) => {
  await lxcOk(t, d.socket, 'image', 'import', unifiedImage('launch', 'launch'), '--alias', 'big');
  const ws = await d.websocket('/1.0/events?type=operation');
  const events = collect(ws);
  const run = await lxcOnTerminal(d.socket, 'launch big c1');
  t.is(run.status, 0, run.stdout + run.stderr);
  // The client redraws its line after a carriage return, its own words before the daemon's.
  const drawn = run.stdout.split('\r').map((s) => s.trim()).filter((s) => s.startsWith('Retrieving image: '));
  t.true(drawn.length >= 1, `no progress drawn: ${JSON.stringify(run.stdout)}`);
  for (const line of drawn) t.regex(line.slice('Retrieving image: '.length), LINE);
  await waitFor(() => createEvents(events, 'c1').some((op) => op.status === 'Success'), 10_000, 'the create operation to end');
  ws.close();

  const ops = createEvents(events, 'c1');
  const { percents, times } = checkProgressEvents(t, ops);
  // How long the unpack took, as the daemon logged it: one that lasts shows where it is on the way.
  const logged = d.output().split('\n').filter((l) => l.includes('image unpacked into the pool')).map((l) => JSON.parse(l));
  const unpackMs = Number(logged.at(-1)?.ms);
  t.log(`progress events: ${percents.join(',')} over an unpack of ${unpackMs} ms`);
  t.true(percents.length >= 1);
  if (unpackMs >= 300) t.true(percents.some((p) => p < 100), 'a percentage on the way');
  for (let i = 1; i < percents.length; i++) t.true(percents[i]! > percents[i - 1]!, `percentages rise: ${percents.join(',')}`);
  t.is(percents.at(-1), 100);
  // A few a second at most: a report comes 250 ms after the one before, save the last (100%).
  for (let i = 1; i < times.length - 1; i++) t.true(times[i]! - times[i - 1]! >= 240, `reports ${times[i]! - times[i - 1]!} ms apart`);
  // As the reference, the finished operation still shows the whole unpack.
  const done = ops.find((op) => op.status === 'Success');
  t.is(done.metadata[KEY].replace(/\(.*\)/, ''), 'Unpack: 100% ');
  t.is(done.metadata.progress.percent, '100');
  t.is((await lxc(d.socket, 'exec', 'c1', '--', 'stat', '-c', '%s', '/root/big.bin')).stdout.trim(), String(BIG));
});

lxcTest('a pool that already holds the image unpacks nothing: the create shows no unpack progress', async (t) => {
  const ws = await d.websocket('/1.0/events?type=operation');
  const events = collect(ws);
  await lxcOk(t, d.socket, 'init', 'big', 'c2');
  await waitFor(() => createEvents(events, 'c2').some((op) => op.status === 'Success'), 10_000, 'the create operation to end');
  ws.close();
  t.false(createEvents(events, 'c2').some((op) => op.metadata?.[KEY]), 'no progress without an unpack');
});

lxcTest('lxc init onto a btrfs pool shows the progress of the image volume being made (create_instance_from_image_unpack_progress)', async (t) => {
  await lxcOk(t, d.socket, 'storage', 'create', 'bp', 'btrfs', 'size=1GiB');
  const ws = await d.websocket('/1.0/events?type=operation');
  const events = collect(ws);
  const run = await lxcOnTerminal(d.socket, 'init big c3 -s bp');
  t.is(run.status, 0, run.stdout + run.stderr);
  t.regex(run.stdout, /Retrieving image: Unpack: \d+% \(/);
  await waitFor(() => createEvents(events, 'c3').some((op) => op.status === 'Success'), 10_000, 'the create operation to end');
  ws.close();
  const { percents } = checkProgressEvents(t, createEvents(events, 'c3'));
  t.is(percents.at(-1), 100);
  await lxcOk(t, d.socket, 'delete', 'c3');
  await lxcOk(t, d.socket, 'storage', 'delete', 'bp');
});

lxcTest('two instances created at once from an image the pool lacks: one unpack, both operations show its progress', async (t) => {
  await lxcOk(t, d.socket, 'storage', 'create', 'p2', 'dir');
  const ws = await d.websocket('/1.0/events?type=operation');
  const events = collect(ws);
  const [a, b] = await Promise.all([lxc(d.socket, 'init', 'big', 'c4', '-s', 'p2'), lxc(d.socket, 'init', 'big', 'c5', '-s', 'p2')]);
  t.is(a.status, 0, a.stderr);
  t.is(b.status, 0, b.stderr);
  await waitFor(() => ['c4', 'c5'].every((n) => createEvents(events, n).some((op) => op.status === 'Success')), 10_000, 'both creates to end');
  ws.close();
  for (const name of ['c4', 'c5']) {
    const done = createEvents(events, name).find((op) => op.status === 'Success');
    t.is(done.metadata?.progress?.percent, '100', `${name}: ${JSON.stringify(done.metadata)}`);
  }
  const images = readdirSync(path.join(d.dir, 'storage-pools', 'p2', 'images'));
  t.is(images.length, 1, `one image volume: ${images.join(', ')}`);
  for (const name of ['c4', 'c5']) await lxcOk(t, d.socket, 'delete', name);
  await lxcOk(t, d.socket, 'storage', 'delete', 'p2');
});

lxcTest('a split image with a squashfs rootfs: progress over both files, ending at 100%', async (t) => {
  writeFileSync(path.join(tree, 'rootfs/etc/salt'), 'squashfs');
  const meta = path.join(work, 'meta.tar.gz');
  const rootfs = path.join(work, 'rootfs.squashfs');
  execFileSync('tar', ['-c', '-z', '-f', meta, '-C', tree, 'metadata.yaml', 'templates']);
  // Uncompressed: random data would not shrink, and building stays fast.
  execFileSync('mksquashfs', [path.join(tree, 'rootfs'), rootfs, '-noappend', '-quiet', '-noI', '-noD', '-noF', '-noX']);
  await lxcOk(t, d.socket, 'image', 'import', meta, rootfs, '--alias', 'sq');
  const ws = await d.websocket('/1.0/events?type=operation');
  const events = collect(ws);
  await lxcOk(t, d.socket, 'init', 'sq', 'c6');
  await waitFor(() => createEvents(events, 'c6').some((op) => op.status === 'Success'), 10_000, 'the create operation to end');
  ws.close();
  const { percents } = checkProgressEvents(t, createEvents(events, 'c6'));
  t.is(percents.at(-1), 100);
  t.is(statSync(path.join(d.dir, 'storage-pools', 'default', 'containers', 'c6', 'rootfs', 'root', 'big.bin')).size, BIG);
  await lxcOk(t, d.socket, 'delete', 'c6');
});

lxcTest('a damaged image file fails the create with tar\'s reason and leaves no volume or process behind', async (t) => {
  const file = unifiedImage('damaged', 'damaged');
  await lxcOk(t, d.socket, 'image', 'import', file, '--alias', 'damaged');
  const fingerprint = JSON.parse(await lxcOk(t, d.socket, 'query', '/1.0/images/aliases/damaged')).target;
  truncateSync(path.join(d.dir, 'images', fingerprint), Math.floor(statSync(file).size / 2));
  const res = await lxc(d.socket, 'init', 'damaged', 'c7');
  t.not(res.status, 0);
  t.regex(res.stderr, /tar/);
  t.false(JSON.parse(await lxcOk(t, d.socket, 'list', '--format', 'json')).some((c: any) => c.name === 'c7'));
  const images = path.join(d.dir, 'storage-pools', 'default', 'images');
  t.false(readdirSync(images).some((n) => n.startsWith(fingerprint)), 'no image volume, whole or scratch');
  t.false(existsSync(path.join(d.dir, 'storage-pools', 'default', 'containers', 'c7')));
  const children = spawnSync('ps', ['--ppid', String(d.child.pid), '-o', 'comm='], { encoding: 'utf8' }).stdout.split('\n');
  t.false(children.some((c) => ['tar', 'gzip', 'setpriv'].includes(c.trim())), `no tar left running: ${children.join(' ')}`);
});
