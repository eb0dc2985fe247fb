/**
 * The image replica pass, on real members in network namespaces through the real `lxc`: with
 * `cluster.images_minimal_replica=2`, removing a member that held one of the two copies brings a copy to
 * another member; with -1, a member that joins later receives every image.
 */
import test from 'ava';
import { existsSync } from 'node:fs';
import { clusterNetUnavailable, makeClusterNet, type ClusterNet, type NetDaemon } from '../helpers/cluster-net.js';
import { lxcOk } from '../helpers/clients.js';
import { buildBusyboxImage } from '../helpers/busybox-image.js';
import { importImage } from '../helpers/api.js';
import { waitFor } from '../helpers/daemon.js';

const skip = clusterNetUnavailable();
const serial = skip ? test.serial.skip : test.serial;
if (skip) console.warn(`cluster-image-replica skipped: ${skip}`);

/** How long the pass may take after a membership change (it settles 2 s, then copies one small image). */
const PASS_BOUND_MS = 15_000;

let net: ClusterNet;
const started: NetDaemon[] = [];
const address = (d: NetDaemon) => `${d.member.address}:8443`;
const holds = (d: NetDaemon, fp: string) => existsSync(`${d.dir}/images/${fp}`);
const ok = { is: (a: unknown, b: unknown, m?: string) => { if (a !== b) throw new Error(m); } };

async function join(first: NetDaemon, d: NetDaemon, name: string): Promise<void> {
  const token = (await lxcOk(ok, first.socket, 'cluster', 'add', name)).trim().split('\n').pop()!.trim();
  const required = JSON.parse(await lxcOk(ok, first.socket, 'query', '/1.0/cluster')).member_config;
  await lxcOk(ok, d.socket, 'config', 'set', 'core.https_address', address(d));
  const body = { server_name: name, enabled: true, server_address: address(d), cluster_address: address(first), cluster_token: token, member_config: required };
  await lxcOk(ok, d.socket, 'query', '--wait', '-X', 'PUT', '-d', JSON.stringify(body), '/1.0/cluster');
}

test.before(async () => {
  if (skip) return;
  net = makeClusterNet({ subnet: '10.19.14', block: 2, members: 4 });
  started.push(await net.startDaemon(net.members[0]!, { args: ['--init', 'auto'] }));
  started.push(await net.startDaemon(net.members[1]!));
  started.push(await net.startDaemon(net.members[2]!));
  const [d1, d2, d3] = started as [NetDaemon, NetDaemon, NetDaemon];
  await lxcOk(ok, d1.socket, 'config', 'set', 'core.https_address', address(d1));
  await lxcOk(ok, d1.socket, 'cluster', 'enable', 'm1');
  await join(d1, d2, 'm2');
  await join(d1, d3, 'm3');
});

test.afterEach.always((t) => {
  if (!t.passed) for (const d of started) t.log(`${d.member.ns}: ${d.output().slice(-3000)}`);
});

test.after.always(async () => {
  if (net) await net.teardown();
});

serial('replica 2: after a member holding a copy is removed, another member receives one', async (t) => {
  const [d1, d2, d3] = started as [NetDaemon, NetDaemon, NetDaemon];
  await lxcOk(t, d1.socket, 'config', 'set', 'cluster.images_minimal_replica', '2');
  const fp = await importImage(d1, buildBusyboxImage('gzip').unified, 'bb');
  await waitFor(async () => [d1, d2, d3].filter((d) => holds(d, fp)).length === 2, 10_000, 'two members holding the image');
  const [other, spare] = holds(d2, fp) ? [d2, d3] : [d3, d2];
  t.false(holds(spare, fp), 'the third member holds no copy yet');
  const otherName = other === d2 ? 'm2' : 'm3';

  const removedAt = Date.now();
  t.regex(await lxcOk(t, d1.socket, 'cluster', 'remove', otherName), new RegExp(`Member ${otherName} removed`));
  await waitFor(async () => holds(spare, fp), PASS_BOUND_MS, 'the remaining member receiving a copy');
  t.log(`copy restored ${Date.now() - removedAt} ms after the removal`);
  t.true(holds(d1, fp));
  const listed = (await lxcOk(t, d1.socket, 'cluster', 'list', '--format', 'csv')).trim().split('\n');
  t.is(listed.length, 2, listed.join('\n'));
});

serial('replica -1: a member that joins later receives every image', async (t) => {
  const d1 = started[0]!;
  await lxcOk(t, d1.socket, 'config', 'set', '--', 'cluster.images_minimal_replica', '-1');
  const fp = await importImage(d1, buildBusyboxImage('xz').unified, 'all');
  const d4 = await net.startDaemon(net.members[3]!);
  started.push(d4);
  t.false(holds(d4, fp));
  // The removal above left two voters, and one is demoted to standby some seconds later: a join made
  // meanwhile waits for that (the membership lock) and goes through.
  const joinedAt = Date.now();
  await join(d1, d4, 'm4');
  await waitFor(async () => holds(d4, fp), PASS_BOUND_MS, 'the joiner receiving the image');
  t.log(`image on the joiner ${Date.now() - joinedAt} ms after its join`);
  const first = JSON.parse(await lxcOk(t, d4.socket, 'query', '/1.0/images/aliases/bb')).target;
  await waitFor(async () => holds(d4, first), PASS_BOUND_MS, 'the joiner receiving the earlier image too');
});
