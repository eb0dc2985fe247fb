/**
 * Copies across the members of a cluster of three real daemons (each in its own network namespace),
 * through the real `lxc` and pylxd: a snapshot of another member's instance, a copy where the member
 * asked, the source's member and the target are three different ones, `--instance-only`, a stateless
 * copy of a running instance, a `--refresh` copy that moves only what changed, `lxc move --target`
 * with snapshots, and failures that leave nothing behind on the target member.
 */
import test from 'ava';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { clusterNetUnavailable, makeClusterNet, type ClusterNet, type NetDaemon } from '../helpers/cluster-net.js';
import { lxc, lxcOk, lxcRefused, python } from '../helpers/clients.js';
import { buildBusyboxImage } from '../helpers/busybox-image.js';
import { importImage } from '../helpers/api.js';
import { distRoot, killContainers, projectRoot, waitFor } from '../helpers/daemon.js';
import { formCluster } from '../helpers/cluster-form.js';

const skip = clusterNetUnavailable() ?? (existsSync(path.join(distRoot, 'plugins', 'clustering', 'index.js')) ? undefined : 'this build has no clustering plugin');
const serial = skip ? test.serial.skip : test.serial;
if (skip) console.warn(`cluster-copies skipped: ${skip}`);

let net: ClusterNet;
let d: NetDaemon[] = [];

test.before(async () => {
  if (skip) return;
  net = makeClusterNet({ subnet: '10.19.13', block: 0, members: 3 });
  d = [await net.startDaemon(net.members[0]!, { args: ['--init', 'auto'] })];
  for (const member of net.members.slice(1)) d.push(await net.startDaemon(member));
});

test.after.always(async () => {
  for (const m of d) killContainers(m.dir);
  if (net) await net.teardown();
});

const member = (name: string) => d[Number(name.slice(1)) - 1]!;
const show = async (t: any, name: string, via = d[0]!) => JSON.parse(await lxcOk(t, via.socket, 'query', `/1.0/instances/${name}?recursion=1`));
const containerPath = (m: NetDaemon, name: string, rel = '') => `${m.dir}/storage-pools/default/containers/${name}${rel}`;
const snapshotPath = (m: NetDaemon, name: string, snap: string, rel = '') => `${m.dir}/storage-pools/default/containers-snapshots/${name}/${snap}${rel}`;
/** A file of an instance's tree as the member holding it has it on disk. */
const fileOn = (m: NetDaemon, file: string) => {
  const r = m.member.exec(['cat', file]);
  return r.status === 0 ? r.stdout : undefined;
};
const inodeOn = (m: NetDaemon, file: string) => m.member.exec(['stat', '-c', '%i', file]).stdout.trim();
const exists = (m: NetDaemon, file: string) => m.member.exec(['test', '-e', file]).status === 0;

/** Operations of member `m` (m1..m3 by index) still running (none may be left behind by a copy). */
async function liveOperations(m: NetDaemon): Promise<any[]> {
  const ops = (await m.request('GET', '/1.0/operations?recursion=1')).json?.metadata ?? {};
  const name = `m${d.indexOf(m) + 1}`;
  return [...(ops.running ?? []), ...(ops.pending ?? [])].filter((op: any) => op.location === name);
}

serial('three members form a cluster', async (t) => {
  const [d1] = d as [NetDaemon];
  await importImage(d1, buildBusyboxImage('gzip').unified, 'bb');
  await formCluster(t, d);
  // c1 lives on m2: a snapshot s0 holds "one", the instance itself "two" and a big file copies keep.
  const [, d2] = d as [NetDaemon, NetDaemon];
  await lxcOk(t, d1.socket, 'launch', 'bb', 'c1', '--target', 'm2');
  await lxcOk(t, d1.socket, 'exec', 'c1', '--', 'sh', '-c', 'echo one > /root/mark && dd if=/dev/zero of=/root/big bs=1k count=2048 2>/dev/null');
  await lxcOk(t, d1.socket, 'config', 'set', 'c1', 'user.mark', 'at-s0');
  await lxcOk(t, d1.socket, 'snapshot', 'c1', 's0');
  await lxcOk(t, d1.socket, 'config', 'set', 'c1', 'user.mark', 'after-s0');
  await lxcOk(t, d1.socket, 'exec', 'c1', '--', 'sh', '-c', 'echo two > /root/mark');
  t.is(fileOn(d2, snapshotPath(d2, 'c1', 's0', '/rootfs/root/mark')), 'one\n');
});

serial('lxc copy of a snapshot held by another member: to a third member through the first, and to the member asked', async (t) => {
  const [d1, d2, d3] = d as [NetDaemon, NetDaemon, NetDaemon];
  // Asked m1, source on m2, made on m3.
  await lxcOk(t, d1.socket, 'copy', 'c1/s0', 'fromsnap', '--target', 'm3');
  const copy = await show(t, 'fromsnap', d2);
  t.is(copy.location, 'm3');
  t.is(copy.status, 'Stopped');
  t.is(copy.config['user.mark'], 'at-s0', 'the snapshot\'s config, not the instance\'s');
  t.deepEqual(copy.snapshots ?? [], [], 'a copy of a snapshot has no snapshots');
  t.is(fileOn(d3, containerPath(d3, 'fromsnap', '/rootfs/root/mark')), 'one\n', 'the snapshot\'s files, on m3');
  t.false(exists(d1, containerPath(d1, 'fromsnap')), 'nothing on the member asked');
  // Asked m2 (the source's member), made on m1.
  await lxcOk(t, d2.socket, 'copy', 'c1/s0', 'fromsnap2', '--target', 'm1');
  t.is((await show(t, 'fromsnap2', d3)).location, 'm1');
  t.is(fileOn(d1, containerPath(d1, 'fromsnap2', '/rootfs/root/mark')), 'one\n');
  // The copy starts and runs where it was made.
  await lxcOk(t, d3.socket, 'start', 'fromsnap2');
  t.is((await lxcOk(t, d3.socket, 'exec', 'fromsnap2', '--', 'cat', '/root/mark')), 'one\n');
  await lxcOk(t, d3.socket, 'delete', '--force', 'fromsnap2');
  await lxcOk(t, d1.socket, 'delete', 'fromsnap');
  // No migration source is left waiting on the source's member.
  t.deepEqual((await liveOperations(d2)).map((op) => op.description), []);
});

serial('a running instance of another member copied stateless to a third, with its snapshots or --instance-only', async (t) => {
  const [d1, d2, d3] = d as [NetDaemon, NetDaemon, NetDaemon];
  t.is((await show(t, 'c1')).status, 'Running');
  await lxcOk(t, d1.socket, 'copy', 'c1', 'whole', '--target', 'm3');
  const whole = await show(t, 'whole');
  t.is(whole.location, 'm3');
  t.is(whole.status, 'Stopped', 'a stateless copy is not started');
  t.is(whole.config['user.mark'], 'after-s0');
  t.deepEqual(whole.snapshots.map((s: any) => s.name), ['s0']);
  t.is(fileOn(d3, containerPath(d3, 'whole', '/rootfs/root/mark')), 'two\n');
  t.is(fileOn(d3, snapshotPath(d3, 'whole', 's0', '/rootfs/root/mark')), 'one\n');
  t.is((await show(t, 'c1', d3)).status, 'Running', 'the source runs on');

  await lxcOk(t, d3.socket, 'copy', 'c1', 'alone', '--target', 'm1', '--instance-only');
  const alone = await show(t, 'alone');
  t.is(alone.location, 'm1');
  t.deepEqual(alone.snapshots ?? [], []);
  t.false(exists(d1, snapshotPath(d1, 'alone', 's0')));
  t.is(fileOn(d1, containerPath(d1, 'alone', '/rootfs/root/mark')), 'two\n');
  await lxcOk(t, d1.socket, 'delete', 'alone');
  t.deepEqual((await liveOperations(d2)).map((op) => op.description), []);
});

serial('lxc copy --refresh from another member sends only what changed; the copy\'s member does it wherever it is asked', async (t) => {
  const [d1, d2, d3] = d as [NetDaemon, NetDaemon, NetDaemon];
  // "whole" (on m3) is c1 (on m2) with s0. c1 changes and gets s1.
  await lxcOk(t, d1.socket, 'exec', 'c1', '--', 'sh', '-c', 'echo three > /root/mark');
  await lxcOk(t, d1.socket, 'snapshot', 'c1', 's1');
  await lxcOk(t, d1.socket, 'exec', 'c1', '--', 'sh', '-c', 'echo four > /root/mark');
  const bigBefore = inodeOn(d3, containerPath(d3, 'whole', '/rootfs/root/big'));
  const s0Before = inodeOn(d3, snapshotPath(d3, 'whole', 's0', '/rootfs/root/mark'));
  const s0Created = (await show(t, 'whole')).snapshots[0].created_at;
  // Asked m1, no --target: the refresh goes to m3, which holds "whole".
  await lxcOk(t, d1.socket, 'copy', 'c1', 'whole', '--refresh');
  const refreshed = await show(t, 'whole', d2);
  t.is(refreshed.location, 'm3');
  t.deepEqual(refreshed.snapshots.map((s: any) => s.name), ['s0', 's1']);
  t.is(refreshed.snapshots[0].created_at, s0Created, 's0 was kept, not made again');
  t.is(fileOn(d3, containerPath(d3, 'whole', '/rootfs/root/mark')), 'four\n');
  t.is(fileOn(d3, snapshotPath(d3, 'whole', 's1', '/rootfs/root/mark')), 'three\n');
  t.is(inodeOn(d3, containerPath(d3, 'whole', '/rootfs/root/big')), bigBefore, 'an unchanged file was not sent again');
  t.is(inodeOn(d3, snapshotPath(d3, 'whole', 's0', '/rootfs/root/mark')), s0Before, 'a snapshot the copy has was not sent again');
  t.false(exists(d1, containerPath(d1, 'whole')) || exists(d2, containerPath(d2, 'whole')), 'only m3 has the copy');

  // Whichever member the request is placed on (here the source's, then a third), the copy's member refreshes it.
  for (const [i, placed] of ['m2', 'm1'].entries()) {
    await lxcOk(t, d1.socket, 'exec', 'c1', '--', 'sh', '-c', `echo again-${i} > /root/mark`);
    await lxcOk(t, d2.socket, 'copy', 'c1', 'whole', '--refresh', '--target', placed);
    t.is(fileOn(d3, containerPath(d3, 'whole', '/rootfs/root/mark')), `again-${i}\n`, `placed on ${placed}`);
    t.is(inodeOn(d3, containerPath(d3, 'whole', '/rootfs/root/big')), bigBefore);
    t.false(exists(member(placed), containerPath(member(placed), 'whole')), `nothing made on ${placed}`);
  }
  t.is((await show(t, 'whole')).location, 'm3');

  // A refresh of a running copy is refused; the copy stays as it was.
  await lxcOk(t, d1.socket, 'start', 'whole');
  const running = await lxcRefused(t, d2.socket, 'copy', 'c1', 'whole', '--refresh');
  t.regex(running, /running/);
  await lxcOk(t, d1.socket, 'stop', 'whole', '--force');
  t.deepEqual((await show(t, 'whole')).snapshots.map((s: any) => s.name), ['s0', 's1']);
  t.deepEqual((await liveOperations(d2)).map((op) => op.description), [], 'the source\'s migration ended with the refused refresh');

  // A refresh onto a name that does not exist yet makes the whole copy.
  await lxcOk(t, d3.socket, 'copy', 'c1', 'fresh', '--refresh', '--target', 'm1');
  const fresh = await show(t, 'fresh');
  t.is(fresh.location, 'm1');
  t.deepEqual(fresh.snapshots.map((s: any) => s.name), ['s0', 's1']);
  await lxcOk(t, d1.socket, 'delete', 'fresh');
});

serial('lxc move --target takes the snapshots along; the original member keeps nothing', async (t) => {
  const [d1, , d3] = d as [NetDaemon, NetDaemon, NetDaemon];
  await lxcOk(t, d1.socket, 'move', 'whole', '--target', 'm1');
  const moved = await show(t, 'whole', d3);
  t.is(moved.location, 'm1');
  t.deepEqual(moved.snapshots.map((s: any) => s.name), ['s0', 's1']);
  t.is(fileOn(d1, snapshotPath(d1, 'whole', 's1', '/rootfs/root/mark')), 'three\n');
  t.is(fileOn(d1, containerPath(d1, 'whole', '/rootfs/root/mark')), 'again-1\n');
  t.false(exists(d3, containerPath(d3, 'whole')), 'no volume left on m3');
  t.false(exists(d3, snapshotPath(d3, 'whole', 's0')), 'no snapshot left on m3');
  // Back again through another member, with the snapshots.
  await lxcOk(t, d3.socket, 'move', 'whole', '--target', 'm3');
  t.deepEqual((await show(t, 'whole')).snapshots.map((s: any) => s.name), ['s0', 's1']);
  t.false(exists(d1, containerPath(d1, 'whole')));
  await lxcOk(t, d1.socket, 'delete', 'whole');
});

serial('a copy that fails on the target member leaves no instance and no volume there, and frees the source', async (t) => {
  const [d1, d2, d3] = d as [NetDaemon, NetDaemon, NetDaemon];
  // An unknown snapshot, or a snapshot refreshed: refused at once.
  t.regex(await lxcRefused(t, d1.socket, 'copy', 'c1/nope', 'bad', '--target', 'm3'), /not found/);
  t.regex(await lxcRefused(t, d1.socket, 'copy', 'c1/s0', 'bad', '--target', 'm3', '--refresh'), /only be used with instances/);
  // A bad key of the copy's config: refused by the target before anything moves.
  t.regex(await lxcRefused(t, d1.socket, 'copy', 'c1/s0', 'bad', '--target', 'm3', '-c', 'limits.memory=lots'), /limits.memory/);
  // The target cannot make the volume (its place is taken on m3's disk): refused before anything moves.
  const planted = containerPath(d3, 'bad');
  t.is(d3.member.exec(['sh', '-c', `mkdir -p "$(dirname ${planted})" && echo planted > ${planted}`]).status, 0);
  const failed = await lxcRefused(t, d1.socket, 'copy', 'c1', 'bad', '--target', 'm3');
  t.log(failed.trim());
  t.is(fileOn(d3, planted), 'planted\n', 'what was there stays');
  d3.member.exec(['rm', '-f', planted]);
  for (const m of [d1, d2, d3]) t.false(exists(m, snapshotPath(m, 'bad', 's0')), `no snapshot left on ${m.member.ns}`);
  t.notRegex(await lxcOk(t, d2.socket, 'list', '--format', 'csv', '-c', 'n'), /^bad$/m, 'no record');
  const volumes = JSON.parse(await lxcOk(t, d1.socket, 'query', '/1.0/storage-pools/default/volumes/container'));
  t.false(volumes.some((v: string) => v.endsWith('/bad')), 'no volume record');
  await waitFor(async () => (await liveOperations(d2)).length === 0, 10_000, 'the source\'s migration to end');
  // The source is not left locked.
  await lxcOk(t, d3.socket, 'config', 'set', 'c1', 'user.after', 'failure');
  // The same copy works once the place is free.
  await lxcOk(t, d1.socket, 'copy', 'c1', 'bad', '--target', 'm3', '--instance-only');
  await lxcOk(t, d1.socket, 'delete', 'bad');
});

serial('a copy whose source ends mid-transfer fails and is undone on the target member', async (t) => {
  const [d1, d2, d3] = d as [NetDaemon, NetDaemon, NetDaemon];
  // Slow enough to be caught in the middle: 8 MiB that do not compress, at 1 MB/s.
  await lxcOk(t, d1.socket, 'exec', 'c1', '--', 'sh', '-c', 'dd if=/dev/urandom of=/root/noise bs=1k count=8192 2>/dev/null');
  await lxcOk(t, d1.socket, 'storage', 'set', 'default', 'rsync.bwlimit', '1MB');
  try {
    const copying = lxc(d1.socket, 'copy', 'c1', 'cut', '--target', 'm3');
    let source: any;
    await waitFor(async () => {
      source = (await liveOperations(d2)).find((op) => op.description === 'Migrating instance');
      return source !== undefined && exists(d3, containerPath(d3, 'cut', '/rootfs/root'));
    }, 20_000, 'the transfer to start');
    // The source's member ends its side (as a member going away would).
    const cancelled = await d2.request('DELETE', `/1.0/operations/${source.id}`);
    t.true(cancelled.status < 300, cancelled.body);
    const failed = await copying;
    t.not(failed.status, 0, 'the copy fails');
    t.log(failed.stderr.trim());
  } finally {
    await lxcOk(t, d1.socket, 'storage', 'unset', 'default', 'rsync.bwlimit');
  }
  t.notRegex(await lxcOk(t, d2.socket, 'list', '--format', 'csv', '-c', 'n'), /^cut$/m, 'no record');
  await waitFor(() => !exists(d3, containerPath(d3, 'cut')), 10_000, 'the half-made volume to go');
  t.false(exists(d3, snapshotPath(d3, 'cut', 's0')), 'no snapshot left on m3');
  const volumes = JSON.parse(await lxcOk(t, d1.socket, 'query', '/1.0/storage-pools/default/volumes/container'));
  t.false(volumes.some((v: string) => v.endsWith('/cut')), 'no volume record');
  t.deepEqual((await liveOperations(d3)).map((op) => op.description), [], 'nothing left running on m3');
  await lxcOk(t, d1.socket, 'exec', 'c1', '--', 'rm', '/root/noise');
});

serial('pylxd copies a snapshot of another member\'s instance onto the member it names', async (t) => {
  const [d1, , d3] = d as [NetDaemon, NetDaemon, NetDaemon];
  const run = await python(path.join(projectRoot, 'test', 'e2e', 'pylxd_cluster_copies.py'), [d1.socket, 'c1/s0', 'pysnap', 'm3']);
  t.is(run.status, 0, run.stderr);
  const seen = JSON.parse(run.stdout.trim().split('\n').pop()!);
  t.is(seen.location, 'm3');
  t.is(seen.mark, 'at-s0');
  t.deepEqual(seen.snapshots, []);
  t.is(fileOn(d3, containerPath(d3, 'pysnap', '/rootfs/root/mark')), 'one\n');
  await lxcOk(t, d1.socket, 'delete', 'pysnap');
});
