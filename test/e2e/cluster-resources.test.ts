/**
 * What every member holds a part of, in a cluster of real daemons in network namespaces, through the
 * real `lxc`: storage pools and networks of the first member become the cluster's at enable, a joiner
 * makes its own part of each from its member_config, new ones are defined member by member with
 * `--target` and created cluster-wide, deleted everywhere; an image imported on one member is fetched by
 * another that needs it.
 */
import test from 'ava';
import { existsSync } from 'node:fs';
import { clusterNetUnavailable, makeClusterNet, type ClusterNet, type NetDaemon } from '../helpers/cluster-net.js';
import { lxc, lxcOk } from '../helpers/clients.js';
import { buildBusyboxImage } from '../helpers/busybox-image.js';
import { importImage } from '../helpers/api.js';
import { corrald, nodeFlags, waitFor } from '../helpers/daemon.js';
import { spawnSync } from 'node:child_process';

const skip = clusterNetUnavailable();
const serial = skip ? test.serial.skip : test.serial;
if (skip) console.warn(`cluster-resources skipped: ${skip}`);

let net: ClusterNet;
let d1: NetDaemon;
let d2: NetDaemon;
let d3: NetDaemon;
const address = (d: NetDaemon) => `${d.member.address}:8443`;
const hasLink = (d: NetDaemon, name: string) => d.member.exec(['ip', 'link', 'show', name]).status === 0;

test.before(async () => {
  if (skip) return;
  net = makeClusterNet({ subnet: '10.19.9', block: 1, members: 3 });
  d1 = await net.startDaemon(net.members[0]!, { args: ['--init', 'auto'] });
  d2 = await net.startDaemon(net.members[1]!);
  d3 = await net.startDaemon(net.members[2]!);
});

test.afterEach.always((t) => {
  // What the members said, for a failure: their own errors are the first thing to read.
  if (!t.passed) for (const d of [d1, d2, d3]) if (d) t.log(`${d.member.ns}: ${d.output().slice(-3000)}`);
});

test.after.always(async () => {
  if (net) await net.teardown();
});

serial('the first member\'s pool and network become the cluster\'s; a joiner makes its own part of each', async (t) => {
  await importImage(d1, buildBusyboxImage('gzip').unified, 'bb');
  await lxcOk(t, d1.socket, 'network', 'create', 'cbr0', 'ipv4.address=10.219.91.1/24', 'ipv4.nat=false', 'ipv6.address=none');
  await lxcOk(t, d1.socket, 'config', 'set', 'core.https_address', address(d1));
  await lxcOk(t, d1.socket, 'cluster', 'enable', 'm1');
  // One copy per image: the on-demand fetch below must find m2 without one (the replica pass would give it one).
  await lxcOk(t, d1.socket, 'config', 'set', 'cluster.images_minimal_replica', '1');

  const pool = JSON.parse(await lxcOk(t, d1.socket, 'query', '/1.0/storage-pools/default'));
  t.deepEqual(pool.locations, ['m1']);
  t.is(pool.config.source, undefined, 'the cluster-wide view has no member-specific keys');
  const own = JSON.parse(await lxcOk(t, d1.socket, 'query', '/1.0/storage-pools/default?target=m1'));
  t.true(own.config.source.startsWith(d1.dir), 'm1\'s part lies in m1\'s data dir');

  const required = JSON.parse(await lxcOk(t, d1.socket, 'query', '/1.0/cluster')).member_config;
  t.true(required.some((e: any) => e.entity === 'storage-pool' && e.name === 'default' && e.key === 'source'), JSON.stringify(required));

  const token = (await lxcOk(t, d1.socket, 'cluster', 'add', 'm2')).trim().split('\n').pop()!.trim();
  await lxcOk(t, d2.socket, 'config', 'set', 'core.https_address', address(d2));
  const body = { server_name: 'm2', enabled: true, server_address: address(d2), cluster_address: address(d1), cluster_token: token, member_config: required };
  await lxcOk(t, d2.socket, 'query', '--wait', '-X', 'PUT', '-d', JSON.stringify(body), '/1.0/cluster');

  const joined = JSON.parse(await lxcOk(t, d2.socket, 'query', '/1.0/storage-pools/default?target=m2'));
  t.deepEqual(joined.locations, ['m1', 'm2']);
  t.is(joined.status, 'Created');
  t.true(joined.config.source.startsWith(d2.dir), `m2's part lies in m2's data dir: ${joined.config.source}`);
  t.true(existsSync(joined.config.source));
  t.true(hasLink(d2, 'cbr0'), 'the joiner brought the cluster\'s bridge up in its own namespace');
  const network = JSON.parse(await lxcOk(t, d2.socket, 'query', '/1.0/networks/cbr0'));
  t.deepEqual(network.locations, ['m1', 'm2']);
  t.is(network.config['ipv4.address'], '10.219.91.1/24');
});

serial('a pool is defined on each member with --target, pending until created cluster-wide, then deleted everywhere', async (t) => {
  const alone = await lxc(d1.socket, 'storage', 'create', 'p0', 'dir');
  t.not(alone.status, 0);
  t.regex(alone.stderr, /not defined on any member/);

  await lxcOk(t, d1.socket, 'storage', 'create', 'p1', 'dir', '--target', 'm1');
  const half = await lxc(d1.socket, 'storage', 'create', 'p1', 'dir');
  t.regex(half.stderr, /not defined on member m2/);
  const shared = await lxc(d1.socket, 'storage', 'create', 'p1', 'dir', 'rsync.bwlimit=1M', '--target', 'm2');
  t.regex(shared.stderr, /may not be used as member-specific key/);
  await lxcOk(t, d2.socket, 'storage', 'create', 'p1', 'dir', '--target', 'm2');
  t.regex(await lxcOk(t, d1.socket, 'storage', 'list', '--format', 'csv'), /^p1,.*PENDING/im);

  await lxcOk(t, d1.socket, 'storage', 'create', 'p1', 'dir', 'rsync.bwlimit=1M');
  const parts = await Promise.all([d1, d2].map(async (d, i) => JSON.parse(await lxcOk(t, d.socket, 'query', `/1.0/storage-pools/p1?target=m${i + 1}`))));
  for (const [i, p] of parts.entries()) {
    t.is(p.status, 'Created');
    t.is(p.config['rsync.bwlimit'], '1M');
    t.true(existsSync(p.config.source), `m${i + 1}'s directory exists`);
  }
  t.regex(await lxcOk(t, d2.socket, 'storage', 'list', '--format', 'csv'), /^p1,.*CREATED/im);

  await lxcOk(t, d2.socket, 'storage', 'delete', 'p1');
  for (const p of parts) t.false(existsSync(p.config.source), `${p.config.source} is gone`);
  t.notRegex(await lxcOk(t, d1.socket, 'storage', 'list', '--format', 'csv'), /^p1,/m);
});

serial('a network defined on each member comes up on both when created cluster-wide, and goes from both', async (t) => {
  for (const [d, m] of [[d1, 'm1'], [d2, 'm2']] as const) await lxcOk(t, d.socket, 'network', 'create', 'cbr1', '--target', m);
  t.false(hasLink(d1, 'cbr1'), 'defined is not created');
  await lxcOk(t, d1.socket, 'network', 'create', 'cbr1', 'ipv4.address=10.219.92.1/24', 'ipv4.nat=false', 'ipv6.address=none');
  t.true(hasLink(d1, 'cbr1'));
  t.true(hasLink(d2, 'cbr1'));
  await lxcOk(t, d1.socket, 'network', 'delete', 'cbr1');
  t.false(hasLink(d1, 'cbr1'));
  t.false(hasLink(d2, 'cbr1'));
});

serial('an image imported on m1 is fetched by m2 when an instance there needs it', async (t) => {
  const fp = JSON.parse(await lxcOk(t, d2.socket, 'query', '/1.0/images/aliases/bb')).target;
  t.false(existsSync(`${d2.dir}/images/${fp}`), 'm2 does not hold the files yet');
  await lxcOk(t, d1.socket, 'init', 'bb', 'c1', '--target', 'm2');
  await waitFor(async () => existsSync(`${d2.dir}/images/${fp}`), 5000, 'the image files on m2');
  const c1 = JSON.parse(await lxcOk(t, d1.socket, 'query', '/1.0/instances/c1'));
  t.is(c1.location, 'm2');
  await lxcOk(t, d1.socket, 'delete', 'c1');
  await lxcOk(t, d1.socket, 'image', 'delete', 'bb');
  await waitFor(async () => !existsSync(`${d2.dir}/images/${fp}`), 5000, 'the image files gone from m2 too');
});

serial('a third member joins with corrald init --preseed: its config, then the cluster section with a token and its member_config', async (t) => {
  const token = (await lxcOk(t, d1.socket, 'cluster', 'add', 'm3')).trim().split('\n').pop()!.trim();
  const preseed = [
    'config:',
    `  core.https_address: ${address(d3)}`,
    'cluster:',
    '  enabled: true',
    '  server_name: m3',
    `  server_address: ${address(d3)}`,
    `  cluster_address: ${address(d1)}`,
    `  cluster_token: ${token}`,
    '  member_config:',
    '  - entity: storage-pool',
    '    name: default',
    '    key: source',
    `    value: ${d3.dir}/pool-default`,
  ].join('\n');
  const run = spawnSync(process.execPath, [...nodeFlags, corrald, 'init', '--dir', d3.dir, '--preseed', '-'], { input: preseed, encoding: 'utf8', timeout: 120_000 });
  t.is(run.status, 0, run.stderr);
  const pool = JSON.parse(await lxcOk(t, d3.socket, 'query', '/1.0/storage-pools/default?target=m3'));
  t.is(pool.config.source, `${d3.dir}/pool-default`, 'the joiner made its part where its member_config said');
  t.true(existsSync(`${d3.dir}/pool-default`));
  t.deepEqual(pool.locations, ['m1', 'm2', 'm3']);
  t.true(hasLink(d3, 'cbr0'));
  t.regex(await lxcOk(t, d2.socket, 'cluster', 'list', '--format', 'csv'), /^m3,/m);
});

serial('a new image is copied at once to cluster.images_minimal_replica members, or to every member with -1 (clustering_image_replication)', async (t) => {
  const holders = (fp: string) => [d1, d2, d3].filter((d) => existsSync(`${d.dir}/images/${fp}`)).length;
  await lxcOk(t, d1.socket, 'config', 'set', 'cluster.images_minimal_replica', '2');
  const two = buildBusyboxImage('xz');
  const fpTwo = await importImage(d2, two.unified, 'two');
  await waitFor(async () => holders(fpTwo) === 2, 10_000, 'two members holding the image');
  await new Promise((r) => setTimeout(r, 500));
  t.is(holders(fpTwo), 2, 'no more than two copies');
  await lxcOk(t, d1.socket, 'config', 'set', '--', 'cluster.images_minimal_replica', '-1');
  const all = buildBusyboxImage('bzip2');
  const fpAll = await importImage(d3, all.unified, 'all');
  await waitFor(async () => holders(fpAll) === 3, 10_000, 'every member holding the image');
  t.pass();
});
