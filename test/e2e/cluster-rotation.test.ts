/**
 * Rotating the cluster certificate leaves the cluster database's trust alone (decision 0062): two
 * members, `lxc cluster update-certificate`, then a third joins with a token of the new certificate,
 * all three ONLINE and voting, writes seen on every member, and a restarted member comes back.
 * Real daemons in namespaces (10.19.11 block 0), real etcd, real lxc.
 */
import test from 'ava';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { clusterNetUnavailable, makeClusterNet, type ClusterNet, type NetDaemon } from '../helpers/cluster-net.js';
import { lxc, lxcOk } from '../helpers/clients.js';
import { waitFor } from '../helpers/daemon.js';

const skip = clusterNetUnavailable();
const serial = skip ? test.serial.skip : test.serial;

let net: ClusterNet;
let d: NetDaemon[] = [];
const address = (x: NetDaemon) => `${x.member.address}:8443`;

test.before(async () => {
  if (skip) return;
  net = makeClusterNet({ subnet: '10.19.11', block: 0, members: 3 });
  d = await Promise.all(net.members.map((m) => net.startDaemon(m)));
  for (const x of d) await lxcOk({ is: () => undefined }, x.socket, 'config', 'set', 'core.https_address', '0.0.0.0:8443');
});

test.after.always(async () => {
  if (net) await net.teardown();
});

const members = async (x: NetDaemon): Promise<any[]> => (await x.request('GET', '/1.0/cluster/members?recursion=1')).json?.metadata ?? [];
const tokenFrom = (out: string) => out.trim().split('\n').pop()!.trim();
/** Join `x` as `name` with a token from `lxc cluster add` on `via`. */
const joinWithToken = async (t: { is: (a: unknown, b: unknown, m?: string) => void }, via: NetDaemon, x: NetDaemon, name: string) => {
  const token = tokenFrom(await lxcOk(t, via.socket, 'cluster', 'add', name));
  const body = { server_name: name, enabled: true, server_address: address(x), cluster_token: token, member_config: [] };
  return lxc(x.socket, 'query', '--wait', '-X', 'PUT', '-d', JSON.stringify(body), '/1.0/cluster');
};
const served = (x: NetDaemon) => spawnSync('sh', ['-c', `echo | openssl s_client -connect ${address(x)} 2>/dev/null | openssl x509`], { encoding: 'utf8', timeout: 10_000 }).stdout.trim();

serial('after lxc cluster update-certificate a third member joins and is trusted; writes reach every member; a restarted member comes back', async (t) => {
  await lxcOk(t, d[0]!.socket, 'config', 'set', 'cluster.https_address', address(d[0]!));
  await lxcOk(t, d[0]!.socket, 'cluster', 'enable', 'm1');
  const second = await joinWithToken(t, d[0]!, d[1]!, 'm2');
  t.is(second.status, 0, second.stderr);

  const dir = mkdtempSync(path.join(tmpdir(), 'corral-rotation-'));
  let expected: string;
  try {
    const crt = path.join(dir, 'cluster.crt');
    const key = path.join(dir, 'cluster.key');
    const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:secp384r1', '-nodes', '-keyout', key, '-out', crt, '-days', '30', '-subj', '/O=corral test/CN=rotated'], { encoding: 'utf8' });
    t.is(made.status, 0, made.stderr);
    t.regex(await lxcOk(t, d[0]!.socket, 'cluster', 'update-certificate', crt, key), /Successfully updated/);
    expected = readFileSync(crt, 'utf8').trim();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  for (const x of [d[0]!, d[1]!]) await waitFor(async () => served(x) === expected, 10_000, `${x.member.ns} to serve the new certificate`);

  // The token now carries the new certificate's fingerprint; the joiner gets the new pair and the database CA.
  const third = await joinWithToken(t, d[1]!, d[2]!, 'm3');
  t.is(third.status, 0, third.stderr);
  t.is(served(d[2]!), expected, 'the joiner serves the new cluster certificate');
  for (const x of d) {
    await waitFor(async () => {
      const list = await members(x);
      return list.length === 3 && list.every((m) => m.status === 'Online' && m.database);
    }, 20_000, `three voting members ONLINE as ${x.member.ns} sees them`);
  }
  t.regex(await lxcOk(t, d[2]!.socket, 'cluster', 'list', '--format', 'csv'), /^m3,https:\/\/10\.19\.11\.\d+:8443,"?database/m);

  // Writes from the new member and from an old one reach every member.
  await lxcOk(t, d[2]!.socket, 'profile', 'create', 'from-m3');
  await lxcOk(t, d[0]!.socket, 'profile', 'set', 'from-m3', 'user.by', 'm1');
  for (const x of d) {
    await waitFor(async () => (await x.request('GET', '/1.0/profiles/from-m3')).json?.metadata?.config?.['user.by'] === 'm1', 10_000, `${x.member.ns} to read both writes`);
  }

  // A restarted old member comes back with its etcd trusted by the new one, and keeps writing.
  await d[1]!.stop();
  d[1] = await net.startDaemon(net.members[1]!, { dir: d[1]!.dir });
  await waitFor(async () => (await members(d[2]!)).find((m) => m.server_name === 'm2')?.status === 'Online', 20_000, 'm2 online after its restart');
  await lxcOk(t, d[1]!.socket, 'profile', 'set', 'from-m3', 'user.after', 'restart');
  await waitFor(async () => (await d[2]!.request('GET', '/1.0/profiles/from-m3')).json?.metadata?.config?.['user.after'] === 'restart', 10_000, 'm3 to read m2\'s write after the restart');
  t.is(served(d[1]!), expected, 'the restarted member serves the new certificate');
});
