/**
 * Reads in a cluster never miss a write acknowledged before they began (decision 0061): two daemons, each
 * in its own network namespace with its own etcd member (10.19.10.0/28), formed with the real `lxc`.
 * pylxd writes a profile through one member while threads read it through the other, checking each read
 * against what was acknowledged before it began;
 * `lxc` does the same with a profile. Listings ask the other member for its instances' runtime live,
 * before the records are read, and ask again about instances that question missed.
 */
import test from 'ava';
import path from 'node:path';
import { clusterNetUnavailable, makeClusterNet, type ClusterNet, type NetDaemon } from '../helpers/cluster-net.js';
import { lxcOk, python } from '../helpers/clients.js';
import { killContainers, projectRoot, waitFor } from '../helpers/daemon.js';
import { buildBusyboxImage } from '../helpers/busybox-image.js';
import { importImage } from '../helpers/api.js';

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
  // The first with a storage pool and the default profile's root disk, for the listing test's instances.
  [d1, d2] = await Promise.all([net.startDaemon(net.members[0]!, { args: ['--init', 'auto'] }), net.startDaemon(net.members[1]!)]);
  await lxcOk(fake, d1.socket, 'config', 'set', 'core.https_address', '0.0.0.0:8443');
  await lxcOk(fake, d1.socket, 'config', 'set', 'cluster.https_address', address(d1));
  await lxcOk(fake, d1.socket, 'cluster', 'enable', 'm1');
  const token = (await lxcOk(fake, d1.socket, 'cluster', 'add', 'm2')).trim().split('\n').pop()!.trim();
  const required = JSON.parse(await lxcOk(fake, d1.socket, 'query', '/1.0/cluster')).member_config;
  await lxcOk(fake, d2.socket, 'config', 'set', 'core.https_address', '0.0.0.0:8443');
  const body = { server_name: 'm2', enabled: true, server_address: address(d2), cluster_address: address(d1), cluster_token: token, member_config: required };
  await lxcOk(fake, d2.socket, 'query', '--wait', '-X', 'PUT', '-d', JSON.stringify(body), '/1.0/cluster');
  for (const d of [d1, d2]) {
    await waitFor(async () => ((await d.request('GET', '/1.0/cluster/members?recursion=1')).json?.metadata ?? []).filter((m: any) => m.status === 'Online').length === 2,
      20_000, `both members online on ${d.member.ns}`);
  }
});

test.after.always(async () => {
  for (const d of [d1, d2]) if (d) killContainers(d.dir);
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

serial('lxc list through m1 shows m2\'s instances\' live status, new ones included, never a remembered one', async (t) => {
  await importImage(d1, buildBusyboxImage('gzip').unified, 'bb');
  const statuses = async () => Object.fromEntries((JSON.parse(await lxcOk(t, d1.socket, 'list', '--format', 'json')) as { name: string; status: string; location: string }[])
    .map((i) => [i.name, `${i.status}@${i.location}`]));
  await lxcOk(t, d1.socket, 'init', 'bb', 'r1', '--target', 'm2');
  t.deepEqual(await statuses(), { r1: 'Stopped@m2' });
  // r2 is new to the listing (the question asked early does not name it): it is asked about once the records are read.
  await lxcOk(t, d1.socket, 'launch', 'bb', 'r2', '--target', 'm2');
  t.deepEqual(await statuses(), { r1: 'Stopped@m2', r2: 'Running@m2' });
  // r1 started: the early question is asked live, so the listing shows it running at once.
  await lxcOk(t, d2.socket, 'start', 'r1');
  t.deepEqual(await statuses(), { r1: 'Running@m2', r2: 'Running@m2' });
  await lxcOk(t, d2.socket, 'stop', 'r2', '--force');
  t.deepEqual(await statuses(), { r1: 'Running@m2', r2: 'Stopped@m2' });
  await lxcOk(t, d1.socket, 'delete', 'r2');
  t.deepEqual(await statuses(), { r1: 'Running@m2' });
  await lxcOk(t, d1.socket, 'delete', 'r1', '--force');
  t.deepEqual(await statuses(), {});
});
