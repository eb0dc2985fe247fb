/**
 * A join that meets a demotion. A removal that leaves two voters makes the etcd leader's member demote
 * the other one some seconds later (its etcd member removed, wiped and added back as a learner). A join
 * accepted while that is under way used to add its learner in the middle of it, and the joiner's etcd
 * then refused to start with etcd's own words. Membership changes now take one lock in the cluster
 * database: the join waits for the demotion and goes through. The removal that starts it all tells the
 * removed member to leave while its etcd member is still in, and it becomes standalone. Real members in
 * namespaces, real lxc.
 */
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { clusterNetUnavailable, makeClusterNet, type ClusterNet, type NetDaemon } from '../helpers/cluster-net.js';
import { lxc, lxcOk } from '../helpers/clients.js';
import { waitFor } from '../helpers/daemon.js';

const skip = clusterNetUnavailable();
const serial = skip ? test.serial.skip : test.serial;
if (skip) console.warn(`cluster-join-demotion skipped: ${skip}`);

let net: ClusterNet;
const started: NetDaemon[] = [];
const address = (d: NetDaemon) => `${d.member.address}:8443`;
const ok = { is: (a: unknown, b: unknown, m?: string) => { if (a !== b) throw new Error(m); } };

interface MemberRow { server_name: string; roles: string[]; database: boolean }
const members = async (d: NetDaemon): Promise<MemberRow[]> => (await d.request('GET', '/1.0/cluster/members?recursion=1')).json?.metadata ?? [];

/** The body of a join of `d` as `name` through `first` (the token issued by lxc cluster add). */
async function joinBody(first: NetDaemon, d: NetDaemon, name: string): Promise<Record<string, unknown>> {
  const token = (await lxcOk(ok, first.socket, 'cluster', 'add', name)).trim().split('\n').pop()!.trim();
  const required = JSON.parse(await lxcOk(ok, first.socket, 'query', '/1.0/cluster')).member_config;
  await lxcOk(ok, d.socket, 'config', 'set', 'core.https_address', address(d));
  return { server_name: name, enabled: true, server_address: address(d), cluster_address: address(first), cluster_token: token, member_config: required };
}

test.before(async () => {
  if (skip) return;
  net = makeClusterNet({ subnet: '10.19.15', block: 0, members: 4 });
  for (const m of net.members) started.push(await net.startDaemon(m));
  const [d1, d2, d3] = started as [NetDaemon, NetDaemon, NetDaemon];
  await lxcOk(ok, d1.socket, 'config', 'set', 'core.https_address', address(d1));
  await lxcOk(ok, d1.socket, 'cluster', 'enable', 'm1');
  for (const [d, name] of [[d2, 'm2'], [d3, 'm3']] as const) {
    await lxcOk(ok, d.socket, 'query', '--wait', '-X', 'PUT', '-d', JSON.stringify(await joinBody(d1, d, name)), '/1.0/cluster');
  }
  await waitFor(async () => (await members(d1)).filter((m) => m.database).length === 3, 30_000, 'three voters');
});

test.afterEach.always((t) => {
  if (!t.passed) for (const d of started) t.log(`${d.member.ns}: ${d.output().slice(-3000)}`);
});

test.after.always(async () => {
  if (net) await net.teardown();
});

serial('a join sent while a voter is being demoted waits for the demotion and succeeds; three vote again after it', async (t) => {
  const [d1, d2, d3, d4] = started as [NetDaemon, NetDaemon, NetDaemon, NetDaemon];
  const body = await joinBody(d1, d4, 'm4');
  t.regex(await lxcOk(t, d1.socket, 'cluster', 'remove', 'm3'), /Member m3 removed/);
  // m1 and m2 vote now, one too many: the demotion starts with the removal of one of them from etcd,
  // which shows as a member with no database role at all.
  // Reads on m2 go on throughout (its etcd may be the one restarting): answers or 503s, never a 500.
  const statuses = new Map<number, number>();
  let seen: MemberRow[] = [];
  await waitFor(async () => {
    const res = await d2.request('GET', '/1.0/cluster/members?recursion=1');
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    seen = res.json?.metadata ?? [];
    // The demotion under way shows as a member with no database role at all. Polls that miss it (a
    // demotion can take less than one on a quick host) see it done: the join then comes after it.
    return seen.length === 2 && (seen.some((m) => !m.roles.some((r) => r.startsWith('database'))) || seen.some((m) => m.roles.includes('database-standby')));
  }, 30_000, 'a voter taken out of etcd for its demotion');
  const demoted = seen.find((m) => !m.roles.some((r) => r.startsWith('database')));
  t.log(demoted ? `${demoted.server_name} is being demoted; m4 joins now` : 'the demotion was over before a poll saw it; m4 joins after it');
  const joinStarted = Date.now();
  const put = await d4.request('PUT', '/1.0/cluster', body);
  t.is(put.status, 202, JSON.stringify(put.json));
  const done = await d4.request('GET', `${put.json.operation}/wait?timeout=60`);
  t.is(done.json?.metadata?.status, 'Success', JSON.stringify(done.json?.metadata));
  t.log(`the join took ${Date.now() - joinStarted} ms`);

  await waitFor(async () => {
    const res = await d2.request('GET', '/1.0/cluster/members?recursion=1');
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    return (res.json?.metadata ?? []).filter((m: MemberRow) => m.database).length === 3;
  }, 30_000, 'three voters with the joiner');
  t.log(`reads on m2 meanwhile: ${JSON.stringify(Object.fromEntries(statuses))}`);
  t.deepEqual([...statuses.keys()].filter((s) => s !== 200 && s !== 503), [], 'only answers and 503s');
  const rows = await members(d4);
  t.deepEqual(rows.map((m) => m.server_name).sort(), ['m1', 'm2', 'm4']);
  t.is(rows.filter((m) => m.roles.includes('database-leader')).length, 1);
  t.regex(await lxcOk(t, d4.socket, 'cluster', 'list', '--format', 'csv'), /^m4,/m);

  // The removed member was told to leave before its etcd member was taken out, so it could: it is a
  // standalone server again, its etcd stopped (taken out first, its etcd stopped under it and it was left
  // clustered, unable to read anything).
  await waitFor(async () => (await d3.request('GET', '/1.0/cluster')).json?.metadata?.enabled === false, 15_000, 'm3 standalone again');
  t.is((await d3.request('GET', '/1.0')).json?.metadata?.environment?.server_clustered, false);
  const inNamespace = spawnSync('ip', ['netns', 'pids', d3.member.ns], { encoding: 'utf8' }).stdout.split(/\s+/).filter(Boolean);
  t.deepEqual(inNamespace.filter((pid) => readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'etcd'), [], 'no etcd left in m3\'s namespace');
});

serial('a removal that would cost the quorum is refused before the member is told to leave: it stays a member, clustered', async (t) => {
  const [d1, d2, , d4] = started as [NetDaemon, NetDaemon, NetDaemon, NetDaemon];
  // Three vote (m1, m2, m4); with m4 dead, taking m2 out would leave m1 alone of two voters.
  await d4.kill9();
  const refused = await lxc(d1.socket, 'cluster', 'remove', 'm2');
  t.not(refused.status, 0);
  t.regex(refused.stderr, /would lose its quorum/);
  t.true((await members(d1)).some((m) => m.server_name === 'm2'), 'm2 is still recorded');
  t.is((await d2.request('GET', '/1.0/cluster')).json?.metadata?.enabled, true, 'm2 was not told to leave');
  t.true((await members(d2)).find((m) => m.server_name === 'm2')?.database, 'm2 still votes');
});
