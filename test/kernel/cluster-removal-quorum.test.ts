/**
 * etcd runs without its strict reconfiguration check (decision 0062), so ClusterControl checks a voter's
 * removal itself: three voters on loopback (127.0.24.1-3), one of them frozen (SIGSTOP of its etcd):
 * removing another voter would leave two voters of which one answers, and is refused with a 503 that says
 * so, nothing changed; once the frozen one answers again the same removal goes through. A removed member
 * that leaves afterwards (its etcd gone, its connection on another member's) takes no one else along.
 */
import test from 'ava';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Kernel } from '../../kernel/kernel.js';
import { ClusterControlRef, type ClusterControl } from '../../sdk/index.js';
import { hasEtcd } from '../helpers/etcd-cluster.js';
import { serialUnless } from '../helpers/needs.js';
import { processesWith } from '../helpers/processes.js';
import { distRoot, projectRoot } from '../helpers/daemon.js';

const serial = serialUnless(hasEtcd);
const root = mkdtempSync(path.join(tmpdir(), 'corral-removal-quorum-'));
const kernels: Kernel[] = [];
let frozen: number | undefined;

test.after.always(async () => {
  if (frozen) try { process.kill(frozen, 'SIGCONT'); } catch { /* gone */ }
  for (const k of kernels.reverse()) await k.stop().catch(() => undefined);
  rmSync(root, { recursive: true, force: true });
});

async function start(name: string): Promise<Kernel> {
  const dataDir = path.join(root, name);
  mkdirSync(dataDir, { recursive: true });
  const kernel = await Kernel.start({
    dataDir, storeFile: path.join(dataDir, 'state.db'), registryFile: path.join(projectRoot, 'plugin-registry.json'),
    plugins: 'warnings', compiledRoot: distRoot, logLevel: 'fatal', serverCertificate: false,
  });
  kernels.push(kernel);
  return kernel;
}
const control = (k: Kernel) => k.services.get(ClusterControlRef) as ClusterControl;
const until = async (check: () => Promise<boolean>, ms: number) => {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check().catch(() => false)) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
};

serial('a voter is removed only while a quorum of the voters left answers', async (t) => {
  const [a, b, c] = [await start('a'), await start('b'), await start('c')];
  await control(a).bootstrap({ serverName: 'm1', address: '127.0.24.1:8443' });
  for (const [k, name, address] of [[b, 'm2', '127.0.24.2:8443'], [c, 'm3', '127.0.24.3:8443']] as const) {
    const { initialCluster, memberId } = await control(a).addEtcdMember(control(k).etcdUrlsFor(name, address), true);
    await control(k).join({ serverName: name, address, authority: await control(a).etcdAuthority(), initialCluster, memberConfig: [] });
    await control(a).promoteEtcdMember(memberId);
  }
  const voters = await control(a).etcdMembers();
  t.deepEqual(voters.map((m) => [m.name, m.learner]).sort(), [['m1', false], ['m2', false], ['m3', false]]);
  const m2 = voters.find((m) => m.name === 'm2')!;

  // m3's etcd stops answering (not dead to etcd's transport at once, as a hung host).
  frozen = processesWith(`--data-dir ${path.join(root, 'c', 'cluster', 'etcd', 'data')}`)[0]!.pid;
  process.kill(frozen, 'SIGSTOP');
  const refused = await t.throwsAsync(control(a).removeEtcdMember(m2.id), { message: /would lose its quorum/ });
  t.is((refused as { status?: number }).status, 503);
  t.is((await control(a).etcdMembers()).length, 3, 'nothing removed');

  process.kill(frozen, 'SIGCONT');
  frozen = undefined;
  t.true(await until(async () => {
    await control(a).removeEtcdMember(m2.id);
    return true;
  }, 10_000), 'removed once m3 answers again');
  t.deepEqual((await control(a).etcdMembers()).map((m) => m.name).sort(), ['m1', 'm3']);
});

serial('a removed member that leaves afterwards takes no other member out with it', async (t) => {
  const [a, b] = kernels as [Kernel, Kernel, Kernel];
  // m2 was removed above: its etcd stops by itself, and its connection moves to another member's etcd.
  t.true(await until(async () => !(await control(b).etcdMembers()).some((m) => m.name === 'm2'), 10_000), 'm2 reads the database through another member');
  await control(b).leave();
  t.deepEqual((await control(a).etcdMembers()).map((m) => m.name).sort(), ['m1', 'm3'], 'both remaining voters are still members');
  // A linearizable member list needs a quorum: both members still answer one.
  const c = kernels[2]!;
  t.true(await until(async () => (await control(c).etcdMembers()).length === 2, 5_000), 'the cluster keeps its quorum');
});
