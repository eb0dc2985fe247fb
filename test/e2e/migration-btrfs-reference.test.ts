/**
 * btrfs send/receive between corral and a private reference daemon (LXD 5.0.2), each with a btrfs
 * pool on a loop file, over HTTPS on loopback with the real `lxc` (decision 0042): a stopped
 * reference container (started once, so its files are shifted on disk) with two snapshots arrives
 * in corral by `btrfs receive`, unshifted, and starts; one made on corral goes to the reference by
 * `btrfs send` and starts there.
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
if (missing) console.warn(`Skipping the reference btrfs migration tests: ${missing}`);

const PASSWORD = 'migr2-ref-42';
const client = new RemoteClient(PASSWORD);
const { lxc: remoteLxc, ok } = client;
client.describeFailure = () => `\n${ref?.log().slice(-3000) ?? ''}`;
const octet = { 'content-type': 'application/octet-stream' };
const suffix = randomBytes(3).toString('hex');
let corral: ImageDaemon;
let ref: ReferenceDaemon;

/** The child processes corral's log shows it started since `from` (its output at debug level). */
function processesSince(from: number): { command: string; args: string[] }[] {
  return corral.output().slice(from).split('\n').filter((l) => l.includes('"host process"')).map((l) => JSON.parse(l));
}

/** Run `copy` with corral logging at debug level; resolves with the btrfs commands corral ran meanwhile. */
async function tracedCopy(t: any, ...args: string[]): Promise<string[]> {
  await ok(t, 'config', 'set', 'cor:', 'core.log_level', 'debug');
  const from = corral.output().length;
  try {
    await ok(t, 'copy', ...args);
  } finally {
    await remoteLxc('config', 'unset', 'cor:', 'core.log_level');
  }
  return processesSince(from).filter((p) => p.command === 'btrfs' || p.command === 'rsync').map((p) => `${p.command} ${p.args[0]}`);
}

test.before(async () => {
  if (missing) return;
  ({ corral, ref } = await startReferencePair(client, '127.0.42.3', '127.0.42.4'));
  const pool = await ref.lxc('storage', 'create', 'bt', 'btrfs', 'size=1GiB');
  if (pool.status !== 0) throw new Error(`btrfs pool on the reference: ${pool.stderr}`);
  const cpool = await remoteLxc('storage', 'create', 'cor:bt', 'btrfs', 'size=1GiB');
  if (cpool.status !== 0) throw new Error(`btrfs pool on corral: ${cpool.stderr}`);
});

test.after.always(() => stopReferencePair({ corral, ref }, client));

interop('reference → corral between btrfs pools: btrfs receive of two snapshots and the volume, shifted files unshifted; it starts', async (t) => {
  const name = `hmigr2-r-${suffix}`;
  t.is((await ref.lxc('init', 'bb', name, '-s', 'bt')).status, 0, ref.log());
  // Started once, the reference shifts the files to host ids on disk.
  t.is((await ref.lxc('start', name)).status, 0, ref.log());
  t.is((await ref.lxc('stop', name, '--force')).status, 0);
  for (const [content, snapshot] of [['one\n', 'snap0'], ['two\n', 'snap1'], ['three\n', undefined]] as const) {
    await ref.request('POST', `/1.0/instances/${name}/files?path=/root/marker`, Buffer.from(content), octet);
    if (snapshot) t.is((await ref.lxc('snapshot', name, snapshot)).status, 0);
  }
  const ran = await tracedCopy(t, `ref:${name}`, `cor:${name}`, '-s', 'bt');
  t.deepEqual(ran.filter((c) => c === 'btrfs receive'), ['btrfs receive', 'btrfs receive', 'btrfs receive'], 'two snapshots and the volume by btrfs receive');
  t.false(ran.includes('rsync --server'), 'nothing by rsync');
  const snaps = JSON.parse(await ok(t, 'query', `cor:/1.0/instances/${name}/snapshots?recursion=1`));
  t.deepEqual(snaps.map((s: any) => s.name), ['snap0', 'snap1']);
  await ok(t, 'start', `cor:${name}`);
  t.is(await ok(t, 'exec', `cor:${name}`, '--', 'cat', '/root/marker'), 'three\n');
  t.is(await ok(t, 'exec', `cor:${name}`, '--', 'stat', '-c', '%u:%g', '/root/marker', '/bin/busybox'), '0:0\n0:0\n', 'unshifted');
  await ok(t, 'stop', `cor:${name}`, '--force');
  await ok(t, 'restore', `cor:${name}`, 'snap0');
  t.is((await corral.request('GET', `/1.0/instances/${name}/files?path=/root/marker`)).body, 'one\n');
  await ok(t, 'delete', `cor:${name}`);
  t.is((await ref.lxc('delete', '--force', name)).status, 0);
});

interop('corral → reference between btrfs pools: btrfs send, incremental after the first snapshot; the reference keeps the snapshots and starts it', async (t) => {
  const name = `hmigr2-c-${suffix}`;
  await ok(t, 'init', 'cor:bb', `cor:${name}`, '-s', 'bt');
  for (const [content, snapshot] of [['early\n', 'snap0'], ['middle\n', 'snap1'], ['late\n', undefined]] as const) {
    await corral.request('POST', `/1.0/instances/${name}/files?path=/root/marker`, Buffer.from(content), octet);
    if (snapshot) await ok(t, 'snapshot', `cor:${name}`, snapshot);
  }
  const ran = await tracedCopy(t, `cor:${name}`, `ref:${name}`, '-s', 'bt');
  t.deepEqual(ran.filter((c) => c.startsWith('btrfs send')), ['btrfs send', 'btrfs send', 'btrfs send']);
  t.false(ran.some((c) => c.startsWith('rsync')), 'nothing by rsync');
  t.deepEqual((await ref.request('GET', `/1.0/instances/${name}/snapshots`)).json.metadata, [`/1.0/instances/${name}/snapshots/snap0`, `/1.0/instances/${name}/snapshots/snap1`]);
  t.is((await ref.request('GET', `/1.0/instances/${name}/files?path=/root/marker`)).body, 'late\n');
  t.is((await ref.lxc('start', name)).status, 0, ref.log().slice(-3000));
  t.is((await ref.lxc('exec', name, '--', 'cat', '/root/marker')).stdout, 'late\n');
  t.is((await ref.lxc('stop', name, '--force')).status, 0);
  t.is((await ref.lxc('restore', name, 'snap0')).status, 0);
  t.is((await ref.request('GET', `/1.0/instances/${name}/files?path=/root/marker`)).body, 'early\n');
  t.is((await ref.lxc('delete', '--force', name)).status, 0);
  await ok(t, 'delete', `cor:${name}`);
});

interop('a reference container with the pre-copy keys (migration.incremental.memory*) copies into corral and keeps them; bad values are refused as on the reference', async (t) => {
  const name = `hmigr2-k-${suffix}`;
  const keys = ['-c', 'migration.incremental.memory=true', '-c', 'migration.incremental.memory.iterations=7', '-c', 'migration.incremental.memory.goal=80'];
  t.is((await ref.lxc('init', 'bb', name, '-s', 'bt', ...keys)).status, 0, ref.log());
  await ok(t, 'copy', `ref:${name}`, `cor:${name}`, '-s', 'bt');
  const config = JSON.parse(await ok(t, 'query', `cor:/1.0/instances/${name}`)).config;
  t.is(config['migration.incremental.memory'], 'true');
  t.is(config['migration.incremental.memory.iterations'], '7');
  t.is(config['migration.incremental.memory.goal'], '80');
  for (const [key, value] of [['migration.incremental.memory', 'maybe'], ['migration.incremental.memory.goal', 'x']]) {
    const ours = await remoteLxc('config', 'set', `cor:${name}`, key!, value!);
    const theirs = await ref.lxc('config', 'set', name, key!, value!);
    t.not(ours.status, 0);
    t.not(theirs.status, 0, 'the reference refuses it too');
  }
  await ok(t, 'delete', `cor:${name}`);
  t.is((await ref.lxc('delete', name)).status, 0);
});
