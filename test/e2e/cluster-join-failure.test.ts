/**
 * A join that fails after the accepting member added the joiner's etcd member is undone on both sides:
 * the joiner's etcd cannot start (its peer port taken), or the joiner never comes back after being
 * accepted (the leader takes the unstarted learner out). Either way the next join works. Real daemons
 * in namespaces (10.19.11 block 1), real etcd (etcdctl reads its membership), real lxc.
 */
import test from 'ava';
import path from 'node:path';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { clusterNetUnavailable, makeClusterNet, type ClusterNet, type NetDaemon } from '../helpers/cluster-net.js';
import { lxc, lxcOk } from '../helpers/clients.js';
import { waitFor } from '../helpers/daemon.js';

const skip = clusterNetUnavailable();
const serial = skip ? test.serial.skip : test.serial;

let net: ClusterNet;
let d1: NetDaemon;
let d2: NetDaemon;
let squatter: ChildProcess | undefined;
const address = (x: NetDaemon) => `${x.member.address}:8443`;

test.before(async () => {
  if (skip) return;
  net = makeClusterNet({ subnet: '10.19.11', block: 1, members: 2 });
  [d1, d2] = await Promise.all(net.members.map((m) => net.startDaemon(m)));
  for (const x of [d1, d2]) await lxcOk({ is: () => undefined }, x.socket, 'config', 'set', 'core.https_address', '0.0.0.0:8443');
  await lxcOk({ is: () => undefined }, d1.socket, 'config', 'set', 'cluster.https_address', address(d1));
  await lxcOk({ is: () => undefined }, d1.socket, 'cluster', 'enable', 'm1');
});

test.after.always(async () => {
  squatter?.kill('SIGKILL');
  if (net) await net.teardown();
});

const members = async (x: NetDaemon): Promise<any[]> => (await x.request('GET', '/1.0/cluster/members?recursion=1')).json?.metadata ?? [];
const tokenFrom = (out: string) => out.trim().split('\n').pop()!.trim();
/** The etcd membership as m1's etcd reports it (etcdctl in m1's namespace with m1's etcd certificate). */
const etcdMembers = (): { ID: number; name?: string; isLearner?: boolean }[] => {
  const tls = path.join(d1.dir, 'cluster', 'etcd');
  const run = d1.member.exec(['etcdctl', `--endpoints=https://${d1.member.address}:2379`, `--cacert=${tls}/ca.crt`, `--cert=${tls}/member.crt`, `--key=${tls}/member.key`, '--command-timeout=3s', 'member', 'list', '-w', 'json']);
  if (run.status !== 0) throw new Error(`etcdctl: ${run.stderr}`);
  return JSON.parse(run.stdout).members;
};
const joinBody = (token: string) => JSON.stringify({ server_name: 'm2', enabled: true, server_address: address(d2), cluster_token: token, member_config: [] });

serial('a joiner whose etcd cannot start is undone: no learner left in etcd, no record, the joiner standalone; the next join works', async (t) => {
  // Something else holds the joiner's etcd peer port: its etcd exits at start, after m1 added it.
  squatter = spawn('ip', ['netns', 'exec', d2.member.ns, '/usr/bin/python3', '-c',
    `import socket,time\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\ns.bind(("${d2.member.address}", 2380))\ns.listen()\nprint("ready", flush=True)\ntime.sleep(600)`], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    squatter!.stdout!.on('data', (b: Buffer) => b.toString().includes('ready') && resolve());
    squatter!.once('exit', (code) => reject(new Error(`the port holder exited (${code})`)));
  });
  const failed = await lxc(d2.socket, 'query', '--wait', '-X', 'PUT', '-d', joinBody(tokenFrom(await lxcOk(t, d1.socket, 'cluster', 'add', 'm2'))), '/1.0/cluster');
  t.not(failed.status, 0);
  t.regex(failed.stderr, /etcd/);
  t.deepEqual(etcdMembers().map((m) => m.name), ['m1'], 'the learner added for m2 is gone from etcd');
  t.deepEqual((await members(d1)).map((m) => m.server_name), ['m1']);
  t.is((await d2.request('GET', '/1.0/cluster')).json.metadata.enabled, false);
  t.is((await d2.request('GET', '/1.0')).json.metadata.environment.server_clustered, false);
  squatter.kill('SIGKILL');
  squatter = undefined;

  const again = await lxc(d2.socket, 'query', '--wait', '-X', 'PUT', '-d', joinBody(tokenFrom(await lxcOk(t, d1.socket, 'cluster', 'add', 'm2'))), '/1.0/cluster');
  t.is(again.status, 0, again.stderr);
  await waitFor(async () => (await members(d1)).filter((m) => m.status === 'Online').length === 2, 15_000, 'both members online');
  t.is(etcdMembers().length, 2);
});

serial('an accepted joiner that never starts its etcd is taken out by the leader; the next join works', async (t) => {
  t.regex(await lxcOk(t, d1.socket, 'cluster', 'remove', 'm2'), /Member m2 removed/);
  await waitFor(async () => (await d2.request('GET', '/1.0/cluster')).json?.metadata?.enabled === false, 15_000, 'm2 standalone');
  t.is(etcdMembers().length, 1);

  // The accept step alone, as a joiner that vanished right after it would leave things.
  const token = JSON.parse(Buffer.from(tokenFrom(await lxcOk(t, d1.socket, 'cluster', 'add', 'm2')), 'base64').toString('utf8'));
  const accept = spawnSync('curl', ['-sk', '--max-time', '20', '-X', 'POST', '-H', 'Content-Type: application/json', '-d',
    JSON.stringify({ server_name: 'm2', address: address(d2), secret: token.secret, architecture: 'x86_64' }), `https://${address(d1)}/internal/cluster/accept`], { encoding: 'utf8' });
  const answer = JSON.parse(accept.stdout);
  t.is(answer.status_code, 200, accept.stdout);
  t.truthy(answer.metadata.etcd_ca_certificate, 'the joiner is handed the cluster database CA');
  t.is(etcdMembers().length, 2, 'a learner for m2, never started');
  const accepted = Date.now();
  await waitFor(async () => etcdMembers().length === 1 && (await members(d1)).length === 1, 60_000, 'the unstarted learner and its record taken out');
  t.log(`abandoned join taken out after ${Date.now() - accepted} ms`);

  const again = await lxc(d2.socket, 'query', '--wait', '-X', 'PUT', '-d', joinBody(tokenFrom(await lxcOk(t, d1.socket, 'cluster', 'add', 'm2'))), '/1.0/cluster');
  t.is(again.status, 0, again.stderr);
  await waitFor(async () => (await members(d1)).filter((m) => m.status === 'Online').length === 2, 15_000, 'both members online');
});
