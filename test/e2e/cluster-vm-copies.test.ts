/**
 * Virtual machines copied between the members of a cluster of two real daemons (network namespaces),
 * through the real `lxc`: a stopped VM with a snapshot copies to the other member (its disk and the
 * snapshot's, sparse), a snapshot of it alone, a `--refresh` copy, and `lxc move --target`. The disks
 * are read with debugfs; no VM boots (the copies between servers are booted in vm-migration).
 */
import test from 'ava';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { clusterNetUnavailable, makeClusterNet, type ClusterNet, type NetDaemon } from '../helpers/cluster-net.js';
import { lxcOk } from '../helpers/clients.js';
import { distRoot, killContainers } from '../helpers/daemon.js';
import { formCluster } from '../helpers/cluster-form.js';
import { importTestVmImage, vmProblem } from '../helpers/vm-image.js';

const skip = clusterNetUnavailable() ?? vmProblem() ?? (existsSync(path.join(distRoot, 'plugins', 'clustering', 'index.js')) ? undefined : 'this build has no clustering plugin');
const serial = skip ? test.serial.skip : test.serial;
if (skip) console.warn(`cluster-vm-copies skipped: ${skip}`);

const SIZE = 512 * 1024 * 1024;
let net: ClusterNet;
let d: NetDaemon[] = [];
let work: string;

test.before(async () => {
  if (skip) return;
  work = mkdtempSync(path.join(tmpdir(), 'corral-cluster-vm-'));
  net = makeClusterNet({ subnet: '10.19.13', block: 1, members: 2 });
  d = [await net.startDaemon(net.members[0]!, { args: ['--init', 'auto'] })];
  d.push(await net.startDaemon(net.members[1]!));
});

test.after.always(async () => {
  for (const m of d) killContainers(m.dir);
  if (net) await net.teardown();
  if (work) rmSync(work, { recursive: true, force: true });
});

const disk = (m: NetDaemon, name: string, snapshot?: string) => snapshot
  ? path.join(m.dir, 'storage-pools/default/virtual-machines-snapshots', name, snapshot, 'root.img')
  : path.join(m.dir, 'storage-pools/default/virtual-machines', name, 'root.img');

function mark(file: string, text: string): void {
  writeFileSync(path.join(work, 'marker'), text);
  writeFileSync(path.join(work, 'cmds'), `rm /marker\nwrite ${path.join(work, 'marker')} /marker\n`);
  execFileSync('debugfs', ['-w', '-f', path.join(work, 'cmds'), file], { stdio: 'ignore' });
}
const marker = (file: string) => spawnSync('debugfs', ['-R', 'cat /marker', file], { encoding: 'utf8' }).stdout;
const show = async (t: any, name: string, via = d[0]!) => JSON.parse(await lxcOk(t, via.socket, 'query', `/1.0/instances/${name}?recursion=1`));

serial('two members; a stopped VM on m1 with a snapshot', async (t) => {
  await formCluster(t, d);
  const [d1] = d as [NetDaemon];
  await importTestVmImage(d1.socket, 'busybox-vm');
  await lxcOk(t, d1.socket, 'init', 'busybox-vm', 'v1', '--vm', '--target', 'm1', '-d', `root,size=${SIZE}`, '-c', 'limits.memory=256MiB');
  mark(disk(d1, 'v1'), 'one');
  await lxcOk(t, d1.socket, 'snapshot', 'v1', 's1');
  mark(disk(d1, 'v1'), 'two');
  t.is(marker(disk(d1, 'v1', 's1')), 'one');
});

serial('lxc copy of another member\'s VM, and of its snapshot alone: disks arrive sparse on the target member', async (t) => {
  const [d1, d2] = d as [NetDaemon, NetDaemon];
  await lxcOk(t, d2.socket, 'copy', 'v1', 'v2', '--target', 'm2');
  const v2 = await show(t, 'v2');
  t.is(v2.type, 'virtual-machine');
  t.is(v2.location, 'm2');
  t.deepEqual(v2.snapshots.map((s: any) => s.name), ['s1']);
  t.is(marker(disk(d2, 'v2')), 'two');
  t.is(marker(disk(d2, 'v2', 's1')), 'one');
  t.is(statSync(disk(d2, 'v2')).size, SIZE);
  t.true(statSync(disk(d2, 'v2')).blocks * 512 < 128 * 1024 * 1024, `${statSync(disk(d2, 'v2')).blocks * 512} bytes allocated`);

  await lxcOk(t, d1.socket, 'copy', 'v1/s1', 'v3', '--target', 'm2');
  const v3 = await show(t, 'v3', d2);
  t.is(v3.type, 'virtual-machine');
  t.is(v3.location, 'm2');
  t.deepEqual(v3.snapshots ?? [], []);
  t.is(marker(disk(d2, 'v3')), 'one', 'the snapshot\'s disk');
  t.is(statSync(disk(d2, 'v3')).size, SIZE);
});

serial('lxc copy --refresh of a VM from another member brings the new snapshot and the changed disk', async (t) => {
  const [d1, d2] = d as [NetDaemon, NetDaemon];
  mark(disk(d1, 'v1'), 'three');
  await lxcOk(t, d1.socket, 'snapshot', 'v1', 's2');
  mark(disk(d1, 'v1'), 'four');
  await lxcOk(t, d1.socket, 'copy', 'v1', 'v2', '--refresh');
  const v2 = await show(t, 'v2');
  t.is(v2.location, 'm2');
  t.deepEqual(v2.snapshots.map((s: any) => s.name), ['s1', 's2']);
  t.is(marker(disk(d2, 'v2')), 'four');
  t.is(marker(disk(d2, 'v2', 's2')), 'three');
  t.is(marker(disk(d2, 'v2', 's1')), 'one');
});

serial('lxc move --target takes a VM and its snapshots to the other member', async (t) => {
  const [d1, d2] = d as [NetDaemon, NetDaemon];
  await lxcOk(t, d2.socket, 'move', 'v2', '--target', 'm1');
  const moved = await show(t, 'v2');
  t.is(moved.location, 'm1');
  t.deepEqual(moved.snapshots.map((s: any) => s.name), ['s1', 's2']);
  t.is(marker(disk(d1, 'v2')), 'four');
  t.is(marker(disk(d1, 'v2', 's2')), 'three');
  t.false(existsSync(path.dirname(disk(d2, 'v2'))), 'nothing left on m2');
  for (const name of ['v1', 'v2', 'v3']) await lxcOk(t, d1.socket, 'delete', name);
});
