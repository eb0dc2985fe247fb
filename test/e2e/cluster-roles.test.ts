/**
 * Three members: learners are promoted until three vote (database roles as the reference shows them),
 * the cluster keeps answering when the etcd leader's member is killed, joining through another member
 * than the one that issued the token, a wrong token, a server that is not bare, and forced removal of a
 * dead member. Real daemons in namespaces, real lxc.
 */
import test from 'ava';
import { clusterNetUnavailable, makeClusterNet, type ClusterNet, type NetDaemon } from '../helpers/cluster-net.js';
import { lxc, lxcOk } from '../helpers/clients.js';
import { waitFor } from '../helpers/daemon.js';
import { spawnSync } from 'node:child_process';
import { referenceUnavailable } from '../helpers/reference-daemon.js';

const lxdInitUnavailable = referenceUnavailable();

const skip = clusterNetUnavailable();
const serial = skip ? test.serial.skip : test.serial;

let net: ClusterNet;
let d: NetDaemon[] = [];
const address = (x: NetDaemon) => `${x.member.address}:8443`;
const measured: Record<string, number> = {};

test.before(async () => {
  if (skip) return;
  net = makeClusterNet({ subnet: '10.19.2', block: 4, members: 3 });
  d = await Promise.all(net.members.map((m) => net.startDaemon(m)));
  // m2 stays off the network: `lxd init --preseed` joins it in one PUT, which opens its listener.
  for (const x of [d[0]!, d[2]!]) {
    await lxcOk({ is: () => undefined }, x.socket, 'config', 'set', 'core.https_address', '0.0.0.0:8443');
  }
});

test.after.always(async () => {
  if (net) await net.teardown();
  if (Object.keys(measured).length) console.log(`cluster role measurements (ms): ${JSON.stringify(measured)}`);
});

const members = async (x: NetDaemon): Promise<any[]> => (await x.request('GET', '/1.0/cluster/members?recursion=1')).json?.metadata ?? [];
const tokenFor = async (x: NetDaemon, name: string): Promise<string> => {
  const res = await x.request('POST', '/1.0/cluster/members', { server_name: name });
  const meta = res.json.metadata.metadata;
  return Buffer.from(JSON.stringify({ server_name: meta.serverName, fingerprint: meta.fingerprint, addresses: meta.addresses, secret: meta.secret, expires_at: meta.expiresAt })).toString('base64');
};
const join = (x: NetDaemon, name: string, body: Record<string, unknown>) =>
  lxc(x.socket, 'query', '--wait', '-X', 'PUT', '-d', JSON.stringify({ server_name: name, enabled: true, server_address: address(x), ...body }), '/1.0/cluster');

serial('a server that is not bare, or holds a wrong token, is refused and stays standalone (clustering_join)', async (t) => {
  await lxcOk(t, d[0]!.socket, 'config', 'set', 'cluster.https_address', address(d[0]!));
  await lxcOk(t, d[0]!.socket, 'cluster', 'enable', 'm1');

  // A custom volume on the joiner: joining would discard it.
  await lxcOk(t, d[2]!.socket, 'storage', 'create', 'keep', 'dir');
  await lxcOk(t, d[2]!.socket, 'storage', 'volume', 'create', 'keep', 'data');
  const notBare = await join(d[2]!, 'm3', { cluster_token: await tokenFor(d[0]!, 'm3') });
  t.not(notBare.status, 0);
  t.regex(notBare.stderr, /must be bare/);
  await lxcOk(t, d[2]!.socket, 'storage', 'volume', 'delete', 'keep', 'data');
  await lxcOk(t, d[2]!.socket, 'storage', 'delete', 'keep');

  const genuine = JSON.parse(Buffer.from(await tokenFor(d[0]!, 'm2'), 'base64').toString('utf8'));
  const forged = Buffer.from(JSON.stringify({ ...genuine, secret: '0'.repeat(64) })).toString('base64');
  const wrong = await join(d[1]!, 'm2', { cluster_token: forged });
  t.not(wrong.status, 0);
  t.regex(wrong.stderr, /No valid join token for member "m2"/);
  t.is((await d[1]!.request('GET', '/1.0/cluster')).json.metadata.enabled, false);
  t.is((await members(d[0]!)).length, 1, 'nothing recorded for a refused joiner');
});

serial('three members (the first joiner by the reference\'s lxd init --preseed): learners are promoted until three vote, one of them leading (clustering_roles)', async (t) => {
  const started = Date.now();
  const token2 = await tokenFor(d[0]!, 'm2');
  if (lxdInitUnavailable) {
    t.log(`joining m2 with lxc query instead of lxd init: ${lxdInitUnavailable}`);
    const second = await join(d[1]!, 'm2', { cluster_token: token2 });
    t.is(second.status, 0, second.stderr);
  } else {
    // The reference's own init, as an administrator joins a server: a preseed with the token only.
    const preseed = `cluster:\n  enabled: true\n  server_name: m2\n  server_address: ${address(d[1]!)}\n  cluster_token: ${token2}\n`;
    const init = spawnSync('lxd', ['init', '--preseed'], { input: preseed, env: { ...process.env, LXD_DIR: d[1]!.dir }, encoding: 'utf8', timeout: 60_000 });
    t.is(init.status, 0, init.stderr);
    measured.lxd_init_join = Date.now() - started;
    t.is((await d[1]!.request('GET', '/1.0')).json.metadata.config['core.https_address'], address(d[1]!), 'the join opened the listener');
  }
  await waitFor(async () => (await members(d[0]!)).find((m) => m.server_name === 'm2')?.roles.includes('database-standby'), 10_000, 'm2 standby');
  // The token is issued by m1 and used on m2: any member checks it.
  const token = await tokenFor(d[0]!, 'm3');
  const thirdStarted = Date.now();
  const third = await join(d[2]!, 'm3', { cluster_address: address(d[1]!), cluster_token: token });
  t.is(third.status, 0, third.stderr);
  measured.second_join_right_after = Date.now() - thirdStarted;
  // etcd's strict reconfiguration check held this join until m2 had been connected 5 s (decision 0062).
  t.true(measured.second_join_right_after < 4000, `the second join right after the first took ${measured.second_join_right_after} ms`);
  await waitFor(async () => (await members(d[2]!)).filter((m) => m.database).length === 3, 20_000, 'three voters');
  measured.three_voters_after_first_join = Date.now() - started;
  const list = await members(d[1]!);
  t.is(list.filter((m) => m.roles.includes('database-leader')).length, 1);
  for (const m of list) {
    t.true(m.roles.includes('database'), `${m.server_name} votes`);
    t.is(m.status, 'Online');
  }
  t.notRegex(await lxcOk(t, d[0]!.socket, 'cluster', 'list-tokens', '--format', 'csv'), /^m3,/m, 'the token used on m2 is gone from m1 too');
});

serial('killing a voter\'s member: the others keep answering and writing, it shows OFFLINE, then comes back', async (t) => {
  const victim = d[2]!;
  await victim.kill9();
  const killed = Date.now();
  await waitFor(async () => (await members(d[0]!)).find((m) => m.server_name === 'm3')?.status === 'Offline', 20_000, 'm3 offline');
  measured.voter_offline = Date.now() - killed;
  // Two voters of three: writes go on, from either survivor.
  await lxcOk(t, d[1]!.socket, 'query', '-X', 'PATCH', '-d', JSON.stringify({ description: 'survivor' }), '/1.0/cluster/members/m2');
  t.is((await members(d[0]!)).find((m) => m.server_name === 'm2')?.description, 'survivor');
  // Each member judges heartbeats on its own schedule: m2 may see the silence a moment after m1.
  let seenByM2 = '';
  await waitFor(async () => /No heartbeat/.test(seenByM2 = (await members(d[1]!)).find((m) => m.server_name === 'm3')?.message ?? ''), 10_000, 'm2 to see m3 silent').catch(() => undefined);
  t.regex(seenByM2, /No heartbeat/);

  d[2] = await net.startDaemon(net.members[2]!, { dir: victim.dir });
  const up = Date.now();
  await waitFor(async () => (await members(d[0]!)).find((m) => m.server_name === 'm3')?.status === 'Online', 20_000, 'm3 online again');
  measured.voter_online_after_start = Date.now() - up;
});

serial('killing the etcd leader\'s member: it shows OFFLINE well within 5 s (heartbeats, not the lease renewed at the election), ONLINE again at once after its restart', async (t) => {
  const leaderName = (await members(d[0]!)).find((m) => m.roles.includes('database-leader'))?.server_name as string;
  t.truthy(leaderName);
  const i = Number(leaderName.slice(1)) - 1;
  const observer = d[(i + 1) % 3]!;
  await d[i]!.kill9();
  const killed = Date.now();
  await waitFor(async () => (await members(observer)).find((m) => m.server_name === leaderName)?.status === 'Offline', 20_000, `${leaderName} offline`);
  measured.leader_offline = Date.now() - killed;
  t.true(measured.leader_offline < 4000, `the killed leader's member showed OFFLINE after ${measured.leader_offline} ms`);
  t.regex((await members(observer)).find((m) => m.server_name === leaderName)?.message, /No heartbeat for/);
  // The two others are not judged stale meanwhile.
  t.is((await members(observer)).filter((m) => m.status === 'Online').length, 2);

  d[i] = await net.startDaemon(net.members[i]!, { dir: d[i]!.dir });
  const up = Date.now();
  await waitFor(async () => (await members(observer)).find((m) => m.server_name === leaderName)?.status === 'Online', 20_000, `${leaderName} online again`);
  measured.leader_online_after_start = Date.now() - up;
  t.true(measured.leader_online_after_start < 2000, `${measured.leader_online_after_start} ms`);
});

serial('a dead member is removed with force only (lxc cluster remove --force)', async (t) => {
  const victim = d[2]!;
  await victim.kill9();
  await waitFor(async () => (await members(d[0]!)).find((m) => m.server_name === 'm3')?.status === 'Offline', 20_000, 'm3 offline');
  const plain = await lxc(d[0]!.socket, 'cluster', 'remove', 'm3');
  t.not(plain.status, 0);
  t.regex(plain.stderr, /offline: remove it with force/);
  t.regex(await lxcOk(t, d[0]!.socket, 'cluster', 'remove', 'm3', '--force', '--yes'), /Member m3 removed/);
  t.deepEqual((await members(d[1]!)).map((m) => m.server_name).sort(), ['m1', 'm2']);
});

serial('two voters left after a removal: one is demoted to standby as the reference does (etcd member removed, wiped, added back as a learner), writes go on, and it comes back as a standby after a restart (clustering_roles)', async (t) => {
  // m3 was removed above: m1 and m2 both voted, and an even number of voters is one too many.
  const roleOf = async (x: NetDaemon) => Object.fromEntries((await members(x)).map((m) => [m.server_name, m.roles.filter((r: string) => r.startsWith('database'))]));
  let roles: Record<string, string[]> = {};
  const started = Date.now();
  await waitFor(async () => {
    roles = await roleOf(d[0]!);
    return Object.values(roles).filter((r) => r.includes('database-standby')).length === 1 && Object.values(roles).filter((r) => r.includes('database')).length === 1;
  }, 30_000, 'one voter and one standby');
  measured.demotion = Date.now() - started;
  const standby = Object.keys(roles).find((n) => roles[n]!.includes('database-standby'))!;
  const voter = Object.keys(roles).find((n) => roles[n]!.includes('database'))!;
  t.deepEqual(roles[voter], ['database-leader', 'database']);
  const csv = await lxcOk(t, d[1]!.socket, 'cluster', 'list', '--format', 'csv');
  t.regex(csv, new RegExp(`^${standby},[^\\n]*database-standby`, 'm'), csv);
  t.regex(csv, new RegExp(`^${voter},[^\\n]*database-leader`, 'm'), csv);

  // The demoted member reads and writes through the voter.
  const s = d[Number(standby.slice(1)) - 1]!;
  await lxcOk(t, s.socket, 'query', '-X', 'PATCH', '-d', JSON.stringify({ description: 'standby now' }), `/1.0/cluster/members/${standby}`);
  t.is((await members(d[Number(voter.slice(1)) - 1]!)).find((m) => m.server_name === standby)?.description, 'standby now');

  // Its restart uses the new etcd membership (a learner of the existing cluster).
  await s.stop();
  const i = Number(standby.slice(1)) - 1;
  d[i] = await net.startDaemon(net.members[i]!, { dir: s.dir });
  await waitFor(async () => (await members(d[i]!)).find((m) => m.server_name === standby)?.status === 'Online', 20_000, `${standby} online after its restart`);
  t.deepEqual((await roleOf(d[0]!))[standby], ['database-standby']);
});
