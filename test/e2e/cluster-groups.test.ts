/**
 * Cluster groups (`clustering_groups`) in a cluster of two real daemons, each in its own network namespace
 * (10.19.12.x), through the real `lxc`: `lxc cluster group create/list/show/edit/rename/assign/remove/delete`
 * and their refusals, `lxc launch --target @group` placing on the emptiest member of the group,
 * `scheduler.instance=group`, and `restricted.cluster.target` judged the same whichever member receives a
 * restricted client's `?target=` (the one it names included).
 */
import test from 'ava';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { clusterNetUnavailable, makeClusterNet, type ClusterNet, type NetDaemon } from '../helpers/cluster-net.js';
import { lxc, lxcOk, lxcWithInput } from '../helpers/clients.js';
import { buildBusyboxImage } from '../helpers/busybox-image.js';
import { importImage } from '../helpers/api.js';
import { selfSigned } from '../helpers/pki.js';
import { tlsRequest } from '../helpers/tls-client.js';
import { distRoot, killContainers, waitFor } from '../helpers/daemon.js';

const skip = clusterNetUnavailable() ?? (existsSync(path.join(distRoot, 'plugins', 'clustering', 'index.js')) ? undefined : 'this build has no clustering plugin');
const serial = skip ? test.serial.skip : test.serial;
if (skip) console.warn(`cluster-groups skipped: ${skip}`);

let net: ClusterNet;
let d: NetDaemon[] = [];
const address = (m: NetDaemon) => `${m.member.address}:8443`;

test.before(async () => {
  if (skip) return;
  net = makeClusterNet({ subnet: '10.19.12', block: 0, members: 2 });
  d = [await net.startDaemon(net.members[0]!, { args: ['--init', 'auto'] })];
  d.push(await net.startDaemon(net.members[1]!));
});

test.after.always(async () => {
  for (const m of d) killContainers(m.dir);
  if (net) await net.teardown();
});

const query = async (t: any, m: NetDaemon, url: string) => JSON.parse(await lxcOk(t, m.socket, 'query', url));
const locationOf = async (t: any, name: string, project = 'default') => (await query(t, d[0]!, `/1.0/instances/${name}?project=${project}`)).location;

/** The error `lxc` printed for a command that must fail. */
async function refused(t: any, m: NetDaemon, ...args: string[]): Promise<string> {
  const run = await lxc(m.socket, ...args);
  t.not(run.status, 0, `lxc ${args.join(' ')} should fail`);
  return run.stderr;
}

serial('two members form a cluster; every member is in the default group', async (t) => {
  const [d1, d2] = d as [NetDaemon, NetDaemon];
  await importImage(d1, buildBusyboxImage('gzip').unified, 'bb');
  await lxcOk(t, d1.socket, 'config', 'set', 'core.https_address', address(d1));
  await lxcOk(t, d1.socket, 'cluster', 'enable', 'm1');
  await lxcOk(t, d2.socket, 'config', 'set', 'core.https_address', address(d2));
  const token = (await lxcOk(t, d1.socket, 'cluster', 'add', 'm2')).trim().split('\n').pop()!.trim();
  const required = (await query(t, d1, '/1.0/cluster')).member_config;
  const body = { server_name: 'm2', enabled: true, server_address: address(d2), cluster_address: address(d1), cluster_token: token, member_config: required };
  await lxcOk(t, d2.socket, 'query', '--wait', '-X', 'PUT', '-d', JSON.stringify(body), '/1.0/cluster');
  await waitFor(async () => (await d1.request('GET', '/1.0/cluster/members?recursion=1')).json?.metadata?.filter((m: any) => m.status === 'Online').length === 2, 15_000, 'two members online');
  t.deepEqual(await query(t, d2, '/1.0/cluster/groups'), ['/1.0/cluster/groups/default']);
  t.deepEqual(await query(t, d2, '/1.0/cluster/groups/default'), { description: 'Default cluster group', members: ['m1', 'm2'], name: 'default' });
  t.deepEqual((await query(t, d1, '/1.0/cluster/members/m2')).groups, ['default']);
});

serial('lxc cluster group create, assign, show, edit, rename, remove and delete, seen from both members (clustering_groups)', async (t) => {
  const [d1, d2] = d as [NetDaemon, NetDaemon];
  t.regex(await lxcOk(t, d1.socket, 'cluster', 'group', 'create', 'g1'), /Cluster group g1 created/);
  await lxcOk(t, d2.socket, 'cluster', 'group', 'assign', 'm2', 'default,g1');
  t.deepEqual((await query(t, d1, '/1.0/cluster/members/m2')).groups, ['default', 'g1']);
  const shown = await lxcOk(t, d1.socket, 'cluster', 'group', 'show', 'g1');
  t.regex(shown, /members:\n- m2\nname: g1/);
  const list = await lxcOk(t, d2.socket, 'cluster', 'group', 'list', '--format', 'csv');
  t.deepEqual(list.trim().split('\n'), ['default,Default cluster group,2', 'g1,,1']);

  // edit: the description and exactly these members.
  const edited = await lxcWithInput(d1.socket, 'description: the first group\nmembers:\n- m1\n- m2\n', 'cluster', 'group', 'edit', 'g1');
  t.is(edited.status, 0, edited.stderr);
  t.deepEqual(await query(t, d2, '/1.0/cluster/groups/g1'), { description: 'the first group', members: ['m1', 'm2'], name: 'g1' });
  t.deepEqual((await query(t, d2, '/1.0/cluster/members/m1')).groups, ['default', 'g1']);

  t.regex(await lxcOk(t, d2.socket, 'cluster', 'group', 'rename', 'g1', 'ga'), /renamed to ga/);
  t.deepEqual((await query(t, d1, '/1.0/cluster/members/m1')).groups, ['default', 'ga']);
  await lxcOk(t, d1.socket, 'cluster', 'group', 'remove', 'm1', 'ga');
  t.deepEqual((await query(t, d1, '/1.0/cluster/groups/ga')).members, ['m2']);

  // Refusals, each leaving everything as it was.
  t.regex(await refused(t, d1, 'cluster', 'group', 'delete', 'ga'), /Only empty cluster groups can be removed/);
  t.regex(await refused(t, d1, 'cluster', 'group', 'delete', 'default'), /cannot be deleted/);
  t.regex(await refused(t, d1, 'cluster', 'group', 'rename', 'default', 'x'), /cannot be renamed/);
  t.regex(await refused(t, d1, 'cluster', 'group', 'create', 'ga'), /already exists/);
  t.regex(await refused(t, d1, 'cluster', 'group', 'rename', 'ga', 'default'), /already in use/);
  t.regex(await refused(t, d1, 'cluster', 'group', 'assign', 'm1', 'nope'), /Cluster group "nope" not found/);
  t.regex(await refused(t, d1, 'cluster', 'group', 'delete', 'nope'), /Cluster group not found/);
  const unknownMember = await lxcWithInput(d1.socket, 'description: x\nmembers:\n- m9\n', 'cluster', 'group', 'edit', 'ga');
  t.not(unknownMember.status, 0);
  t.regex(unknownMember.stderr, /Cluster member "m9" not found/);
  // A group's edit may not leave a member in no group (m2 is in default and ga: taking it out of both fails on the second).
  await lxcOk(t, d1.socket, 'cluster', 'group', 'assign', 'm2', 'ga');
  const orphan = await lxcWithInput(d1.socket, 'description: x\nmembers: []\n', 'cluster', 'group', 'edit', 'ga');
  t.not(orphan.status, 0);
  t.regex(orphan.stderr, /at least one group/);
  t.deepEqual(await query(t, d1, '/1.0/cluster/groups?recursion=1'), [
    { description: 'Default cluster group', members: ['m1'], name: 'default' },
    { description: 'the first group', members: ['m2'], name: 'ga' },
  ]);
  const bad = await d1.request('POST', '/1.0/cluster/groups', { name: 'a/b' });
  t.is(bad.status, 400, bad.body);
  t.is((await d1.request('POST', '/1.0/cluster/groups', {})).json.error, 'No name provided');

  await lxcOk(t, d1.socket, 'cluster', 'group', 'assign', 'm2', 'default');
  t.regex(await lxcOk(t, d2.socket, 'cluster', 'group', 'delete', 'ga'), /Cluster group ga deleted/);
  t.deepEqual(await query(t, d1, '/1.0/cluster/groups'), ['/1.0/cluster/groups/default']);
});

serial('lxc launch --target @group places on the emptiest member of the group; unknown and empty groups are refused (clustering_groups)', async (t) => {
  const [d1, d2] = d as [NetDaemon, NetDaemon];
  await lxcOk(t, d1.socket, 'cluster', 'group', 'create', 'only2');
  await lxcOk(t, d1.socket, 'cluster', 'group', 'assign', 'm2', 'default,only2');
  // m2 holds one more instance than m1: plain placement would pick m1, the group can only pick m2.
  await lxcOk(t, d1.socket, 'init', 'bb', 'h1', '--target', 'm2');
  await lxcOk(t, d1.socket, 'launch', 'bb', 'c1', '--target', '@only2');
  t.is(await locationOf(t, 'c1'), 'm2');
  await lxcOk(t, d2.socket, 'init', 'bb', 'c2', '--target', '@default');
  t.is(await locationOf(t, 'c2'), 'm1', 'the emptier member of default');
  t.regex(await refused(t, d1, 'init', 'bb', 'cx', '--target', '@nope'), /Cluster group "nope" doesn't exist/);
  await lxcOk(t, d1.socket, 'cluster', 'group', 'create', 'empty');
  t.regex(await refused(t, d2, 'init', 'bb', 'cx', '--target', '@empty'), /No suitable cluster member could be found/);
  t.notRegex(await lxcOk(t, d1.socket, 'list', '--format', 'csv', '-c', 'n'), /cx/);
  // Only placement takes a group: a move or a volume naming one is refused (as the reference refuses them), nothing changed.
  t.regex(await refused(t, d1, 'move', 'h1', '--target', '@only2'), /not found/);
  t.is(await locationOf(t, 'h1'), 'm2');
  t.regex(await refused(t, d1, 'storage', 'volume', 'create', 'default', 'v1', '--target', '@only2'), /not found/);
  t.notRegex(await lxcOk(t, d1.socket, 'storage', 'volume', 'list', 'default', '--format', 'csv'), /v1/);

  // scheduler.instance=group: m2 takes instances only through its groups, never by plain placement.
  await lxcOk(t, d1.socket, 'cluster', 'set', 'm2', 'scheduler.instance', 'group');
  await lxcOk(t, d1.socket, 'cluster', 'set', 'm1', 'scheduler.instance', 'manual');
  t.regex(await refused(t, d1, 'init', 'bb', 'cy'), /No suitable cluster member could be found/);
  await lxcOk(t, d1.socket, 'init', 'bb', 'c3', '--target', '@default');
  t.is(await locationOf(t, 'c3'), 'm2', 'm1 is manual: only m2 of default may be picked');
  await lxcOk(t, d1.socket, 'cluster', 'unset', 'm1', 'scheduler.instance');
  await lxcOk(t, d1.socket, 'cluster', 'unset', 'm2', 'scheduler.instance');

  await lxcOk(t, d1.socket, 'delete', '--force', 'c1', 'c2', 'c3', 'h1');
  await lxcOk(t, d1.socket, 'cluster', 'group', 'assign', 'm2', 'default');
  await lxcOk(t, d1.socket, 'cluster', 'group', 'delete', 'only2');
  await lxcOk(t, d1.socket, 'cluster', 'group', 'delete', 'empty');
});

serial('restricted.cluster.target (projects_restricted_cluster_target): a restricted client naming the member it talks to is refused like one naming another; placement and @group follow the key', async (t) => {
  const [d1] = d as [NetDaemon];
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-groups-'));
  try {
    const client = selfSigned(dir, 'tenant');
    await lxcOk(t, d1.socket, 'project', 'create', 'p1', '-c', 'restricted=true', '-c', 'features.images=false');
    await lxcOk(t, d1.socket, 'profile', 'device', 'add', 'default', 'root', 'disk', 'path=/', 'pool=default', '--project', 'p1');
    await lxcOk(t, d1.socket, 'config', 'trust', 'add', client.certFile, '--restricted', '--projects', 'p1', '--name', 'tenant');
    const m1 = { host: d1.member.address, port: 8443 };
    const body = (name: string) => ({ name, source: { type: 'image', alias: 'bb' } });
    const create = async (target: string, name: string) => {
      const res = await tlsRequest(m1, client, 'POST', `/1.0/instances?project=p1${target ? `&target=${encodeURIComponent(target)}` : ''}`, body(name));
      if (res.status === 202) await tlsRequest(m1, client, 'GET', `${res.json.operation}/wait?timeout=60`);
      return res;
    };
    // Blocked (the default): whichever member is named, this one included, or a group.
    for (const target of ['m1', 'm2', '@default']) {
      const res = await create(target, 'rx');
      t.is(res.status, 403, `${target}: ${res.body}`);
      t.regex(res.json.error, /restricted.cluster.target/);
    }
    t.notRegex(await lxcOk(t, d1.socket, 'list', '--project', 'p1', '--format', 'csv', '-c', 'n'), /rx/);
    // No target: placement works for it, also on the other member (m1 takes none by itself here), where the
    // request arrives forwarded with that member named.
    await lxcOk(t, d1.socket, 'cluster', 'set', 'm1', 'scheduler.instance', 'manual');
    for (const name of ['r1', 'r2']) t.is((await create('', name)).status, 202);
    t.deepEqual([await locationOf(t, 'r1', 'p1'), await locationOf(t, 'r2', 'p1')], ['m2', 'm2']);
    await lxcOk(t, d1.socket, 'cluster', 'unset', 'm1', 'scheduler.instance');
    await lxcOk(t, d1.socket, 'project', 'set', 'p1', 'restricted.cluster.target', 'allow');
    t.is((await create('m1', 'r3')).status, 202);
    t.is(await locationOf(t, 'r3', 'p1'), 'm1');
    t.is((await create('@default', 'r4')).status, 202);
    t.regex(await locationOf(t, 'r4', 'p1'), /^m[12]$/);
    for (const name of ['r1', 'r2', 'r3', 'r4']) await lxcOk(t, d1.socket, 'delete', name, '--project', 'p1');
    await lxcOk(t, d1.socket, 'config', 'trust', 'remove', client.fingerprint);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
