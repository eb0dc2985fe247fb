/**
 * Reads in a cluster never miss a write acknowledged before they began (decision 0061): two daemons, each
 * in its own network namespace with its own etcd member (10.19.10.0/28), formed with the real `lxc`.
 * pylxd writes a profile through one member while threads read it through the other, checking each read
 * against what was acknowledged before it began;
 * `lxc` does the same with an instance's configuration.
 */
import test from 'ava';
import path from 'node:path';
import { clusterNetUnavailable, makeClusterNet, type ClusterNet, type NetDaemon } from '../helpers/cluster-net.js';
import { lxcOk, python } from '../helpers/clients.js';
import { projectRoot, waitFor } from '../helpers/daemon.js';

const skip = clusterNetUnavailable();
const serial = skip ? test.serial.skip : test.serial;

let net: ClusterNet;
let d1: NetDaemon;
let d2: NetDaemon;
const address = (d: NetDaemon) => `${d.member.address}:8443`;

/** Setup runs the client outside a test: a failure throws with what lxc said. */
const fake = { is: (actual: unknown, expected: unknown, message?: string) => { if (actual !== expected) throw new Error(message); } };

test.before(async () => {
  if (skip) return;
  net = makeClusterNet({ subnet: '10.19.10', block: 0, members: 2 });
  [d1, d2] = await Promise.all(net.members.map((m) => net.startDaemon(m)));
  await lxcOk(fake, d1.socket, 'config', 'set', 'core.https_address', '0.0.0.0:8443');
  await lxcOk(fake, d1.socket, 'config', 'set', 'cluster.https_address', address(d1));
  await lxcOk(fake, d1.socket, 'cluster', 'enable', 'm1');
  const token = (await lxcOk(fake, d1.socket, 'cluster', 'add', 'm2')).trim().split('\n').pop()!.trim();
  const cert = (await d1.request('GET', '/1.0')).json.metadata.environment.certificate;
  await lxcOk(fake, d2.socket, 'config', 'set', 'core.https_address', '0.0.0.0:8443');
  const body = { server_name: 'm2', enabled: true, server_address: address(d2), cluster_address: address(d1), cluster_certificate: cert, cluster_password: token, member_config: [] };
  await lxcOk(fake, d2.socket, 'query', '--wait', '-X', 'PUT', '-d', JSON.stringify(body), '/1.0/cluster');
  for (const d of [d1, d2]) {
    await waitFor(async () => ((await d.request('GET', '/1.0/cluster/members?recursion=1')).json?.metadata ?? []).filter((m: any) => m.status === 'Online').length === 2,
      20_000, `both members online on ${d.member.ns}`);
  }
});

test.after.always(async () => {
  if (net) await net.teardown();
});

serial('pylxd: readers through m2 never see less of a profile than what m1 acknowledged before they began', async (t) => {
  const run = await python(path.join(projectRoot, 'test', 'e2e', 'pylxd_fresh_reads.py'), [d1.socket, d2.socket, '150']);
  t.is(run.status, 0, run.stderr);
  const result = JSON.parse(run.stdout.trim().split('\n').pop()!);
  t.log(`${result.reads} reads through m2 during ${result.rounds} writes through m1`);
  t.is(result.rounds, 150);
  t.deepEqual(result.missed, [], 'no read through m2 showed less than what m1 had acknowledged before it began');
});

serial('lxc: profile config set through one member, get through the other at once', async (t) => {
  await lxcOk(t, d2.socket, 'profile', 'create', 'fresh-lxc');
  for (let n = 0; n < 10; n++) {
    const [from, to] = n % 2 ? [d2, d1] : [d1, d2];
    await lxcOk(t, from.socket, 'profile', 'set', 'fresh-lxc', 'user.n', String(n));
    t.is((await lxcOk(t, to.socket, 'profile', 'get', 'fresh-lxc', 'user.n')).trim(), String(n));
  }
  await lxcOk(t, d1.socket, 'profile', 'delete', 'fresh-lxc');
});
