/**
 * Health through etcd leases, with a member in its own process (127.0.19.30-31): its lease is seen
 * while it runs and lapses within the TTL (and etcd's expiry sweep) after a SIGKILL of the whole member (its etcd goes with it),
 * and the dead learner can be removed.
 */
import test from 'ava';
import { spawn, type ChildProcess } from 'node:child_process';
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
const root = mkdtempSync(path.join(tmpdir(), 'corral-cluster-leases-'));
let kernel: Kernel | undefined;
let child: ChildProcess | undefined;

test.after.always(async () => {
  child?.kill('SIGKILL');
  await kernel?.stop();
  rmSync(root, { recursive: true, force: true });
});

const until = async (check: () => Promise<boolean> | boolean, ms: number) => {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return false;
};

serial('a member\'s lease is seen while it runs and lapses within its TTL after SIGKILL; the dead learner is removed', async (t) => {
  const dataDir = path.join(root, 'a');
  mkdirSync(dataDir);
  kernel = await Kernel.start({
    dataDir, storeFile: path.join(dataDir, 'state.db'), registryFile: path.join(projectRoot, 'plugin-registry.json'),
    plugins: 'warnings', compiledRoot: distRoot, logLevel: 'fatal', serverCertificate: false,
  });
  const cc = kernel.services.get(ClusterControlRef) as ClusterControl;
  await cc.bootstrap({ serverName: 'm1', address: '127.0.19.30:8443' });
  await cc.holdLease('members/m1', 'm1', 2);
  let held: ReadonlyMap<string, string> = new Map();
  const stopWatching = await cc.watchLeases('members/', (h) => { held = h; });
  t.deepEqual([...held.keys()], ['members/m1']);

  const { initialCluster, memberId } = await cc.addEtcdMember(cc.etcdUrlsFor('m2', '127.0.19.31:8443'), true);
  const childDir = path.join(root, 'b');
  mkdirSync(childDir);
  child = spawn(process.execPath, [path.join(distRoot, 'test', 'helpers', 'cluster-member-child.js'), JSON.stringify({
    dataDir: childDir, serverName: 'm2', address: '127.0.19.31:8443', authority: await cc.etcdAuthority(), initialCluster, lease: { key: 'members/m2', ttl: 2 },
  })], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    child!.stdout!.on('data', (d: Buffer) => { if (d.toString().includes('ready')) resolve(); });
    child!.once('exit', (code) => reject(new Error(`the member exited (${code})`)));
  });
  // Left a learner: a second voter would make every loss of one member a loss of quorum.
  t.true(await until(() => held.has('members/m2'), 2000), 'the joined member\'s lease is seen');

  const etcdPids = () => processesWith(`--data-dir ${path.join(childDir, 'cluster', 'etcd', 'data')}`);
  t.is(etcdPids().length, 1);
  child.kill('SIGKILL');
  const killed = Date.now();
  // Its etcd dies with it (parent-death signal): no orphan keeps the ports.
  t.true(await until(() => etcdPids().length === 0, 2000));
  t.true(await until(() => !held.has('members/m2'), 6000), 'its lease lapsed');
  const lapsed = Date.now() - killed;
  t.log(`lease (TTL 2 s) gone ${lapsed} ms after SIGKILL of the member`);
  // The last keep-alive may have landed just before the kill (a full TTL left); etcd's leader then looks for
  // expired leases every 500 ms and revokes through raft, and the watch delivers it. 2.3 s on a quiet host;
  // the second of slack is for a loaded one.
  t.true(lapsed <= 2000 + 500 + 1000, `lapsed ${lapsed} ms`);
  t.true(held.has('members/m1'), 'the survivor still holds its own');
  // The dead learner is removed from the database's membership.
  t.is((await cc.etcdMembers()).length, 2);
  await cc.removeEtcdMember(memberId);
  t.deepEqual((await cc.etcdMembers()).map((m) => m.name), ['m1']);
  stopWatching();
});
