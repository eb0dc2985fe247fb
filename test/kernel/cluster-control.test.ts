/**
 * ClusterControl in real kernels (profiles, projects, warnings) with real etcd members on loopback
 * (127.0.19.10-19): bootstrap keeps the data, a second kernel joins and sees it, writes reach the
 * other member's listeners, a restart comes back clustered, supervision restarts a killed etcd, a lost
 * quorum is a fast 503 that heals, and failed changes leave the server as it was.
 */
import test from 'ava';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Kernel } from '../../kernel/kernel.js';
import { ClusterControlRef, type ClusterControl, type StoreChange } from '../../sdk/index.js';
import { createSelfSignedCertificate } from '../../kernel/tls/self-signed.js';
import { hasEtcd } from '../helpers/etcd-cluster.js';
import { serialUnless } from '../helpers/needs.js';
import { processesWith } from '../helpers/processes.js';
import { distRoot, projectRoot } from '../helpers/daemon.js';


const serial = serialUnless(hasEtcd);
const PLUGINS = 'warnings,projects,profiles';
const root = mkdtempSync(path.join(tmpdir(), 'corral-cluster-control-'));
const kernels = new Set<Kernel>();
const clusterCert = createSelfSignedCertificate({ organization: 'corral', commonName: 'test cluster', dnsNames: [], ips: [], days: 2 });

async function start(name: string): Promise<Kernel> {
  const dataDir = path.join(root, name);
  const { mkdirSync } = await import('node:fs');
  mkdirSync(dataDir, { recursive: true });
  const kernel = await Kernel.start({
    dataDir, storeFile: path.join(dataDir, 'state.db'), registryFile: path.join(projectRoot, 'plugin-registry.json'),
    plugins: PLUGINS, compiledRoot: distRoot, logLevel: 'fatal', serverCertificate: false,
  });
  kernels.add(kernel);
  return kernel;
}
const stop = async (k: Kernel) => {
  kernels.delete(k);
  await k.stop();
};
const control = (k: Kernel) => k.services.get(ClusterControlRef) as ClusterControl;
const call = async (k: Kernel, method: string, url: string, payload?: unknown) => {
  const res = await k.inject({ method, url, payload: payload === undefined ? undefined : JSON.stringify(payload) });
  return { status: res.statusCode, body: JSON.parse(res.payload || 'null') };
};
const until = async (check: () => Promise<boolean> | boolean, ms = 5000) => {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return false;
};
const etcdOf = (dir: string) => processesWith(`--data-dir ${path.join(root, dir, 'cluster', 'etcd', 'data')}`);

test.after.always(async () => {
  for (const k of kernels) await k.stop().catch(() => undefined);
  rmSync(root, { recursive: true, force: true });
});

serial('a failed bootstrap leaves the server standalone on sqlite with its data, and no etcd running', async (t) => {
  const k = await start('failing');
  t.is((await call(k, 'POST', '/1.0/profiles', { name: 'kept', config: {} })).status, 200);
  // A joiner handed a CA pair that does not match is refused before etcd starts.
  const other = createSelfSignedCertificate({ organization: 'corral', commonName: 'other', dnsNames: [], ips: [], days: 1 });
  const badAuthority = { cert: clusterCert.cert, key: other.key };
  const mismatch = await t.throwsAsync(control(k).join({ serverName: 'x', address: '127.0.19.19:8443', authority: badAuthority, initialCluster: 'x=https://127.0.19.19:2380', memberConfig: [] }), { message: /does not match/ });
  t.is((mismatch as { status?: number }).status, 400);
  const named = await t.throwsAsync(control(k).bootstrap({ serverName: 'x', address: 'localhost:8443' }), { message: /must be an IP address/ });
  t.is((named as { status?: number }).status, 400);
  // An address etcd cannot listen on (not this host's): etcd exits, the bootstrap is undone.
  await t.throwsAsync(control(k).bootstrap({ serverName: 'x', address: '192.0.2.1:8443' }), { message: /etcd exited at start: .*cannot assign requested address/ });
  t.false(k.cluster.enabled);
  t.is(k.cluster.serverName, 'none');
  t.is(k.store.backendKind, 'sqlite');
  t.is((await call(k, 'GET', '/1.0/profiles/kept')).status, 200);
  t.false(existsSync(path.join(k.dataDir, 'cluster', 'state.json')));
  t.deepEqual(etcdOf('failing'), []);
  await stop(k);
});

let a: Kernel;
let b: Kernel;

serial('bootstrap keeps the standalone data; a second server joins, loses its own and sees the cluster\'s', async (t) => {
  a = await start('a');
  t.is((await call(a, 'POST', '/1.0/profiles', { name: 'before', config: { 'user.x': '1' } })).status, 200);
  const started = Date.now();
  await control(a).bootstrap({ serverName: 'm1', address: '127.0.19.10:8443' });
  t.log(`bootstrap: ${Date.now() - started} ms`);
  t.true(a.cluster.enabled);
  t.is(a.cluster.serverName, 'm1');
  t.is(a.store.backendKind, 'etcd');
  t.is((await call(a, 'GET', '/1.0/profiles/before')).body.metadata.config['user.x'], '1');
  t.is(etcdOf('a').length, 1);

  b = await start('b');
  t.is((await call(b, 'POST', '/1.0/profiles', { name: 'mine', config: {} })).status, 200);
  const joinStarted = Date.now();
  const urls = control(b).etcdUrlsFor('m2', '127.0.19.11:8443');
  const { initialCluster, memberId } = await control(a).addEtcdMember(urls, true);
  t.regex(initialCluster, /m1=https:\/\/127\.0\.19\.10:2380/);
  t.regex(initialCluster, /m2=https:\/\/127\.0\.19\.11:2380/);
  const heard: StoreChange[] = [];
  b.store.namespace('profiles').onChange((c) => heard.push(c));
  await control(b).join({ serverName: 'm2', address: '127.0.19.11:8443', authority: await control(a).etcdAuthority(), initialCluster, memberConfig: [] });
  await control(a).promoteEtcdMember(memberId);
  t.log(`join (add learner, start, switch, promote): ${Date.now() - joinStarted} ms`);
  t.is(b.cluster.serverName, 'm2');
  t.is((await call(b, 'GET', '/1.0/profiles/before')).status, 200);
  t.is((await call(b, 'GET', '/1.0/profiles/mine')).status, 404);
  t.true(heard.some((c) => c.name === 'mine' && c.kind === 'delete'), 'the joiner\'s listeners heard its own data go');
  t.true(heard.some((c) => c.name === 'before' && c.kind === 'put'));
  const members = await control(a).etcdMembers();
  t.deepEqual(members.map((m) => [m.name, m.learner]).sort(), [['m1', false], ['m2', false]]);
  t.is(members.filter((m) => m.leader).length, 1);
});

serial('a write on one member reaches the other\'s listeners and reads; published members show in the view', async (t) => {
  const heard: StoreChange[] = [];
  const off = b.store.namespace('profiles').onChange((c) => heard.push(c));
  // Right after a join the database may answer 503 for a moment (a membership change settling): retried, bounded.
  t.true(await until(async () => [200, 409].includes((await call(a, 'POST', '/1.0/profiles', { name: 'from-a', config: {} })).status), 10_000));
  t.true(await until(() => heard.some((c) => c.name === 'from-a' && c.kind === 'put')));
  t.true(await until(async () => (await call(b, 'GET', '/1.0/profiles/from-a')).status === 200, 10_000));
  t.true(await until(async () => (await call(b, 'PATCH', '/1.0/profiles/from-a', { config: { 'user.y': '2' } })).status === 200, 10_000));
  t.true(await until(async () => (await call(a, 'GET', '/1.0/profiles/from-a')).body.metadata.config['user.y'] === '2'));
  off();
  const members = [{ name: 'm1', address: '127.0.19.10:8443', online: true }, { name: 'm2', address: '127.0.19.11:8443', online: true }];
  control(a).publishMembers(members);
  t.deepEqual(a.cluster.members(), members);
});

serial('supervision restarts a member\'s etcd killed with SIGKILL', async (t) => {
  const [proc] = etcdOf('b');
  t.truthy(proc);
  process.kill(proc!.pid, 'SIGKILL');
  t.true(await until(() => etcdOf('b').some((p) => p.pid !== proc!.pid), 10_000), 'etcd started again');
  // A write whose answer was lost with the old etcd may be in already: then the next one finds it (409).
  t.true(await until(async () => [200, 409].includes((await call(b, 'POST', '/1.0/profiles', { name: 'after-kill', config: {} })).status), 10_000));
  t.is((await call(a, 'GET', '/1.0/profiles/after-kill')).status, 200);
});

serial('a restarted member comes back clustered', async (t) => {
  await stop(b);
  t.deepEqual(etcdOf('b'), [], 'etcd stopped with the daemon');
  b = await start('b');
  t.true(b.cluster.enabled);
  t.is(b.cluster.serverName, 'm2');
  t.is(b.store.backendKind, 'etcd');
  t.is((await call(b, 'GET', '/1.0/profiles/from-a')).status, 200);
});

serial('without quorum requests fail at once with 503, and recover by themselves', async (t) => {
  await stop(b);
  // Two voters, one gone: the remaining one loses its leader within an election timeout.
  t.true(await until(async () => (await call(a, 'GET', '/1.0/profiles/from-a')).status === 503, 5000));
  const started = Date.now();
  const res = await call(a, 'PUT', '/1.0/profiles/from-a', { config: {} });
  const took = Date.now() - started;
  t.is(res.status, 503);
  t.regex(res.body.error, /quorum/);
  t.true(took < 500, `answered in ${took} ms`);
  b = await start('b');
  t.true(await until(async () => (await call(a, 'GET', '/1.0/profiles/from-a')).status === 200, 10_000));
  t.is((await call(a, 'PUT', '/1.0/profiles/from-a', { config: {} })).status, 200);
});

serial('rename takes the new name at once and after a restart', async (t) => {
  control(b).rename('m2b');
  t.is(b.cluster.serverName, 'm2b');
  await new Promise((r) => setTimeout(r, 100));
  await stop(b);
  b = await start('b');
  t.is(b.cluster.serverName, 'm2b');
  // Two voters: the other one had no quorum while this one restarted.
  t.true(await until(async () => (await call(a, 'GET', '/1.0/profiles/from-a')).status === 200, 10_000));
});

serial('a member leaves: out of the database, standalone again on a fresh store, its etcd gone', async (t) => {
  const heard: StoreChange[] = [];
  b.store.namespace('profiles').onChange((c) => heard.push(c));
  await control(b).leave();
  t.false(b.cluster.enabled);
  t.is(b.cluster.serverName, 'none');
  t.is(b.store.backendKind, 'sqlite');
  t.deepEqual(etcdOf('b'), []);
  t.false(existsSync(path.join(b.dataDir, 'cluster', 'state.json')));
  t.true(heard.some((c) => c.name === 'from-a' && c.kind === 'delete'), 'listeners heard the cluster\'s data go');
  t.is((await call(b, 'GET', '/1.0/profiles/from-a')).status, 404);
  t.is((await call(b, 'POST', '/1.0/profiles', { name: 'alone', config: {} })).status, 200);
  // The remaining member has its quorum alone.
  t.true(await until(async () => (await call(a, 'POST', '/1.0/profiles', { name: 'still', config: {} })).status === 200, 5000));
  t.deepEqual((await control(a).etcdMembers()).map((m) => m.name), ['m1']);
  await stop(b);
  b = await start('b');
  t.false(b.cluster.enabled);
  t.is((await call(b, 'GET', '/1.0/profiles/alone')).status, 200);
});

serial('replaceCertificate switches the live HTTPS listener to the new pair and keeps it after a restart', async (t) => {
  const { connect } = await import('node:tls');
  const { X509Certificate } = await import('node:crypto');
  const dataDir = path.join(root, 'cert');
  const { mkdirSync } = await import('node:fs');
  mkdirSync(dataDir, { recursive: true });
  const boot = () => Kernel.start({
    dataDir, storeFile: path.join(dataDir, 'state.db'), registryFile: path.join(projectRoot, 'plugin-registry.json'),
    plugins: PLUGINS, compiledRoot: distRoot, logLevel: 'fatal',
  });
  let k = await boot();
  kernels.add(k);
  t.is((await call(k, 'PATCH', '/1.0', { config: { 'core.https_address': '127.0.19.12:8443' } })).status, 200);
  const served = () => new Promise<string>((resolve, reject) => {
    const socket = connect({ host: '127.0.19.12', port: 8443, rejectUnauthorized: false }, () => {
      resolve(new X509Certificate(socket.getPeerCertificate(true).raw).fingerprint256);
      socket.end();
    });
    socket.on('error', reject);
  });
  const fingerprint = (pem: string) => new X509Certificate(pem).fingerprint256;
  t.not(await served(), fingerprint(clusterCert.cert));
  await control(k).replaceCertificate(clusterCert.cert, clusterCert.key);
  t.is(await served(), fingerprint(clusterCert.cert));
  t.is(control(k).certificate()?.cert, clusterCert.cert);
  await stop(k);
  k = await boot();
  kernels.add(k);
  t.is(await served(), fingerprint(clusterCert.cert));
  await stop(k);
});
