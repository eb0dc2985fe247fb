/**
 * Instances in a cluster of three real daemons, each in its own network namespace, through the real
 * `lxc` in the root namespace: `--target` places, placement otherwise picks the emptier member, every
 * member lists every instance with its location and its status as its member tells it, `lxc exec`
 * through another member, `lxc move --target` of a stopped and of a running container, a member that
 * is down shows its instances as errors at once, and evacuation and restore.
 */
import test from 'ava';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { clusterNetUnavailable, makeClusterNet, type ClusterNet, type NetDaemon } from '../helpers/cluster-net.js';
import { lxc, lxcOk, python } from '../helpers/clients.js';
import { buildBusyboxImage } from '../helpers/busybox-image.js';
import { importImage } from '../helpers/api.js';
import { selfSigned } from '../helpers/pki.js';
import { tlsRequest } from '../helpers/tls-client.js';
import { distRoot, killContainers, projectRoot, waitFor } from '../helpers/daemon.js';

// Until the clustering plugin and the store on etcd are merged into this build, there is no cluster to make.
const skip = clusterNetUnavailable() ?? (existsSync(path.join(distRoot, 'plugins', 'clustering', 'index.js')) ? undefined : 'this build has no clustering plugin');
const serial = skip ? test.serial.skip : test.serial;
if (skip) console.warn(`cluster-instances skipped: ${skip}`);

let net: ClusterNet;
let d: NetDaemon[] = [];
const address = (m: NetDaemon) => `${m.member.address}:8443`;
const measured: Record<string, unknown> = {};

test.before(async () => {
  if (skip) return;
  net = makeClusterNet({ subnet: '10.19.4', block: 0, members: 3 });
  d = [await net.startDaemon(net.members[0]!, { args: ['--init', 'auto'] })];
  for (const member of net.members.slice(1)) d.push(await net.startDaemon(member));
});

test.after.always(async () => {
  for (const m of d) killContainers(m.dir);
  if (net) await net.teardown();
  if (Object.keys(measured).length) console.log(`cluster-instances measurements: ${JSON.stringify(measured)}`);
});

/** `name,status,location` rows of `lxc list` through member `m`, sorted by name. */
async function listed(t: any, m: NetDaemon): Promise<string[]> {
  const csv = await lxcOk(t, m.socket, 'list', '--format', 'csv', '-c', 'nsL');
  return csv.trim().split('\n').filter(Boolean).sort();
}

const locationOf = async (t: any, name: string, via = d[0]!) => JSON.parse(await lxcOk(t, via.socket, 'query', `/1.0/instances/${name}`)).location;

serial('three members form a cluster (the image imported on the first)', async (t) => {
  const [d1] = d as [NetDaemon];
  await importImage(d1, buildBusyboxImage('gzip').unified, 'bb');
  // Standalone, an instance's location is "none", as the reference shows it.
  await lxcOk(t, d1.socket, 'init', 'bb', 'c0');
  t.is(await locationOf(t, 'c0'), 'none');
  await lxcOk(t, d1.socket, 'config', 'set', 'core.https_address', address(d1));
  await lxcOk(t, d1.socket, 'cluster', 'enable', 'm1');
  // The instance made before clustering is the first member's.
  t.is(await locationOf(t, 'c0'), 'm1');
  for (const [i, m] of d.slice(1).entries()) {
    const name = `m${i + 2}`;
    await lxcOk(t, m.socket, 'config', 'set', 'core.https_address', address(m));
    // A join right after another may find the database busy settling its voters: it is asked again, with a
    // new token, within a bound.
    const deadline = Date.now() + 30_000;
    for (;;) {
      await lxc(d1.socket, 'cluster', 'revoke-token', name);
      const token = (await lxcOk(t, d1.socket, 'cluster', 'add', name)).trim().split('\n').pop()!.trim();
      const required = JSON.parse(await lxcOk(t, d1.socket, 'query', '/1.0/cluster')).member_config;
      const body = { server_name: name, enabled: true, server_address: address(m), cluster_address: address(d1), cluster_token: token, member_config: required };
      const joined = await lxc(m.socket, 'query', '--wait', '-X', 'PUT', '-d', JSON.stringify(body), '/1.0/cluster');
      if (joined.status === 0) break;
      t.log(`${name} join refused: ${joined.stderr.trim()}`);
      if (Date.now() > deadline || !/quorum|learner/.test(joined.stderr)) {
        t.fail(`${name} could not join: ${joined.stderr}`);
        break;
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
  await waitFor(async () => (await d1.request('GET', '/1.0/cluster/members?recursion=1')).json?.metadata?.filter((m: any) => m.status === 'Online').length === 3, 15_000, 'three members online');
  await lxcOk(t, d1.socket, 'delete', 'c0');
});

serial('lxc launch --target places the instance there; lxc list from every member shows location and status', async (t) => {
  const [d1, d2, d3] = d as [NetDaemon, NetDaemon, NetDaemon];
  await lxcOk(t, d1.socket, 'launch', 'bb', 'c1', '--target', 'm2');
  await lxcOk(t, d3.socket, 'init', 'bb', 'c2', '--target', 'm1');
  t.is(await locationOf(t, 'c1'), 'm2');
  t.is(await locationOf(t, 'c2', d2), 'm1');
  for (const m of [d1, d2, d3]) t.deepEqual(await listed(t, m), ['c1,RUNNING,m2', 'c2,STOPPED,m1'], `as ${m.member.ns} lists them`);
  // recursion=2 carries the state the holding member read.
  const full = JSON.parse(await lxcOk(t, d3.socket, 'query', '/1.0/instances?recursion=2'));
  const c1 = full.find((i: any) => i.name === 'c1');
  t.is(c1.state.status, 'Running');
  t.true(c1.state.pid > 0, 'the pid as m2 sees it');
  // The instances' volumes name their member too.
  const volumes = JSON.parse(await lxcOk(t, d1.socket, 'query', '/1.0/storage-pools/default/volumes/container?recursion=1'));
  t.deepEqual(volumes.map((v: any) => `${v.name}@${v.location}`).sort(), ['c1@m2', 'c2@m1']);
  // The state route of another member's instance answers from that member.
  const state = JSON.parse(await lxcOk(t, d1.socket, 'query', '/1.0/instances/c1/state'));
  t.is(state.status, 'Running');
  t.is(state.pid, c1.state.pid);
});

serial('a target that is no member, or a bad one, is refused before anything is made', async (t) => {
  const [d1] = d as [NetDaemon];
  const unknown = await lxc(d1.socket, 'init', 'bb', 'cx', '--target', 'nope');
  t.not(unknown.status, 0);
  t.regex(unknown.stderr, /Cluster member "nope" not found/);
  t.notRegex(await lxcOk(t, d1.socket, 'list', '--format', 'csv', '-c', 'n'), /cx/);
});

serial('lxc exec on another member\'s instance goes through the member asked', async (t) => {
  const [d1, , d3] = d as [NetDaemon, NetDaemon, NetDaemon];
  for (const m of [d1, d3]) {
    const out = await lxcOk(t, m.socket, 'exec', 'c1', '--', 'hostname');
    t.is(out.trim(), 'c1');
  }
  const code = await lxc(d1.socket, 'exec', 'c1', '--', 'sh', '-c', 'exit 7');
  t.is(code.status, 7, 'the exit code comes back through the forwarding member');
});

serial('without --target the instance goes to the online member with the fewest instances', async (t) => {
  const [d1, d2] = d as [NetDaemon, NetDaemon];
  // m1 holds c2, m2 holds c1, m3 nothing.
  await lxcOk(t, d1.socket, 'init', 'bb', 'c3');
  t.is(await locationOf(t, 'c3'), 'm3');
  // Now one each: the first member listed.
  await lxcOk(t, d2.socket, 'init', 'bb', 'c4');
  t.is(await locationOf(t, 'c4'), 'm1');
  await lxcOk(t, d2.socket, 'init', 'bb', 'c5');
  t.is(await locationOf(t, 'c5'), 'm2');
});

serial('lxc move --target moves a stopped instance, and a running one (stopped, moved, started)', async (t) => {
  const [d1, d2, d3] = d as [NetDaemon, NetDaemon, NetDaemon];
  await lxcOk(t, d1.socket, 'config', 'set', 'c2', 'user.note', 'kept');
  await lxcOk(t, d3.socket, 'move', 'c2', '--target', 'm3');
  t.is(await locationOf(t, 'c2'), 'm3');
  t.is(JSON.parse(await lxcOk(t, d1.socket, 'query', '/1.0/instances/c2')).config['user.note'], 'kept');
  t.false(d[0]!.member.exec(['test', '-e', `${d1.dir}/storage-pools/default/containers/c2`]).status === 0, 'the volume left m1');

  const started = Date.now();
  await lxcOk(t, d1.socket, 'move', 'c1', '--target', 'm1');
  measured.move_running_ms = Date.now() - started;
  t.is(await locationOf(t, 'c1', d3), 'm1');
  for (const m of [d1, d2, d3]) t.true((await listed(t, m)).includes('c1,RUNNING,m1'), `c1 runs on m1 as ${m.member.ns} lists it`);
  t.is((await lxcOk(t, d2.socket, 'exec', 'c1', '--', 'hostname')).trim(), 'c1');
  // No temporary copy is left anywhere.
  t.notRegex(await lxcOk(t, d2.socket, 'list', '--format', 'csv', '-c', 'n'), /move-of-/);

  const same = await lxc(d1.socket, 'move', 'c1', '--target', 'm1');
  t.not(same.status, 0);
  t.regex(same.stderr, /different than instance's current location/);
});

serial('lxc copy of another member\'s instance: the new member pulls it, snapshots included (cluster_internal_copy)', async (t) => {
  const [d1, d2] = d as [NetDaemon, NetDaemon];
  // c3 is m3's.
  await lxcOk(t, d1.socket, 'config', 'set', 'c3', 'user.mark', 'copied');
  await lxcOk(t, d1.socket, 'snapshot', 'c3', 's1');
  await lxcOk(t, d2.socket, 'copy', 'c3', 'c3copy', '--target', 'm1');
  const copy = JSON.parse(await lxcOk(t, d2.socket, 'query', '/1.0/instances/c3copy?recursion=1'));
  t.is(copy.location, 'm1');
  t.is(copy.config['user.mark'], 'copied');
  t.deepEqual(copy.snapshots.map((s: any) => s.name), ['s1']);
  t.not(copy.config['volatile.uuid'], JSON.parse(await lxcOk(t, d2.socket, 'query', '/1.0/instances/c3')).config['volatile.uuid'], 'a copy gets fresh volatile keys');
  t.is(d1.member.exec(['test', '-d', `${d1.dir}/storage-pools/default/containers/c3copy/rootfs/bin`]).status, 0, 'the files are on m1');
  await lxcOk(t, d1.socket, 'delete', 'c3copy');
  await lxcOk(t, d1.socket, 'delete', 'c3/s1');
});

serial('pylxd creates on the member it names and lists every member\'s containers with their location', async (t) => {
  const [, d2] = d as [NetDaemon, NetDaemon];
  const run = await python(path.join(projectRoot, 'test', 'e2e', 'pylxd_cluster_instances.py'), [d2.socket, 'm3']);
  t.is(run.status, 0, run.stderr);
  const seen = JSON.parse(run.stdout.trim().split('\n').pop()!);
  t.is(seen.location, 'm3');
  t.is(seen.listed.py1, 'm3');
  t.is(seen.listed.c1, 'm1');
});

serial('restricted.cluster.target: a restricted client may not pick the member unless the project allows it; placement still works for it', async (t) => {
  const [d1] = d as [NetDaemon];
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-place-'));
  try {
    const client = selfSigned(dir, 'tenant');
    await lxcOk(t, d1.socket, 'project', 'create', 'p1', '-c', 'restricted=true', '-c', 'features.images=false');
    await lxcOk(t, d1.socket, 'profile', 'device', 'add', 'default', 'root', 'disk', 'path=/', 'pool=default', '--project', 'p1');
    await lxcOk(t, d1.socket, 'config', 'trust', 'add', client.certFile, '--restricted', '--projects', 'p1', '--name', 'tenant');
    const m1 = { host: d1.member.address, port: 8443 };
    const body = { name: 'r1', source: { type: 'image', alias: 'bb' } };
    const refused = await tlsRequest(m1, client, 'POST', '/1.0/instances?project=p1&target=m2', body);
    t.is(refused.status, 403, refused.body);
    t.regex(refused.json.error, /restricted.cluster.target/);
    // No target: placed, and made on the member chosen (forwarded there for this client).
    const placed = await tlsRequest(m1, client, 'POST', '/1.0/instances?project=p1', body);
    t.is(placed.status, 202, placed.body);
    await tlsRequest(m1, client, 'GET', `${placed.json.operation}/wait?timeout=30`);
    t.regex(JSON.parse(await lxcOk(t, d1.socket, 'query', '/1.0/instances/r1?project=p1')).location, /^m[123]$/);
    await lxcOk(t, d1.socket, 'project', 'set', 'p1', 'restricted.cluster.target', 'allow');
    const allowed = await tlsRequest(m1, client, 'POST', '/1.0/instances?project=p1&target=m2', { ...body, name: 'r2' });
    t.is(allowed.status, 202, allowed.body);
    await tlsRequest(m1, client, 'GET', `${allowed.json.operation}/wait?timeout=30`);
    t.is(JSON.parse(await lxcOk(t, d1.socket, 'query', '/1.0/instances/r2?project=p1')).location, 'm2');
    for (const name of ['r1', 'r2']) await lxcOk(t, d1.socket, 'delete', name, '--project', 'p1');
    await lxcOk(t, d1.socket, 'config', 'trust', 'remove', client.fingerprint);
    await lxcOk(t, d1.socket, 'project', 'delete', 'p1');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

serial('a bulk state change through one member changes every member\'s instances of the project', async (t) => {
  const [d1, d2, d3] = d as [NetDaemon, NetDaemon, NetDaemon];
  await lxcOk(t, d1.socket, 'project', 'create', 'bulk', '-c', 'features.profiles=false', '-c', 'features.images=false');
  for (const [i, m] of ['m1', 'm2', 'm3'].entries()) await lxcOk(t, d1.socket, 'init', 'bb', `b${i}`, '--target', m, '--project', 'bulk');
  await lxcOk(t, d2.socket, 'query', '--wait', '-X', 'PUT', '-d', JSON.stringify({ state: { action: 'start' } }), '/1.0/instances?project=bulk');
  const running = (await lxcOk(t, d3.socket, 'list', '--project', 'bulk', '--format', 'csv', '-c', 'nsL')).trim().split('\n').sort();
  t.deepEqual(running, ['b0,RUNNING,m1', 'b1,RUNNING,m2', 'b2,RUNNING,m3']);
  await lxcOk(t, d1.socket, 'query', '--wait', '-X', 'PUT', '-d', JSON.stringify({ state: { action: 'stop', force: true } }), '/1.0/instances?project=bulk');
  const stopped = (await lxcOk(t, d2.socket, 'list', '--project', 'bulk', '--format', 'csv', '-c', 'ns')).trim().split('\n').sort();
  t.deepEqual(stopped, ['b0,STOPPED', 'b1,STOPPED', 'b2,STOPPED']);
  for (const i of [0, 1, 2]) await lxcOk(t, d1.socket, 'delete', `b${i}`, '--project', 'bulk');
  await lxcOk(t, d1.socket, 'project', 'delete', 'bulk');
});

serial('GET /1.0/instances?recursion=1 over three members', async (t) => {
  const [d1] = d as [NetDaemon];
  const times: number[] = [];
  for (let i = 0; i < 30; i++) {
    const start = performance.now();
    const r = await d1.request('GET', '/1.0/instances?recursion=1');
    times.push(performance.now() - start);
    t.is(r.status, 200);
  }
  times.sort((a, b) => a - b);
  measured.list_recursion1_median_ms = Number(times[Math.floor(times.length / 2)]!.toFixed(2));
  t.pass();
});

serial('lxc cluster evacuate stops or migrates the member\'s instances per cluster.evacuate; restore brings them back', async (t) => {
  const [d1, d2, d3] = d as [NetDaemon, NetDaemon, NetDaemon];
  // m1 holds c1 (running) and c4; c4 is to stay and stop.
  await lxcOk(t, d1.socket, 'config', 'set', 'c4', 'cluster.evacuate', 'stop');
  await lxcOk(t, d1.socket, 'start', 'c4');
  let started = Date.now();
  await lxcOk(t, d2.socket, 'cluster', 'evacuate', 'm1', '--force');
  measured.evacuate_ms = Date.now() - started;
  const away = await listed(t, d3);
  t.true(away.includes('c4,STOPPED,m1'), away.join('\n'));
  const c1 = away.find((r) => r.startsWith('c1,'))!;
  t.regex(c1, /^c1,RUNNING,m[23]$/, 'c1 runs on another member');
  const moved = JSON.parse(await lxcOk(t, d3.socket, 'query', '/1.0/instances/c1'));
  t.is(moved.config['volatile.evacuate.origin'], 'm1');
  // Nothing new is placed on the evacuated member, though it holds the fewest instances now.
  await waitFor(async () => (await d1.request('GET', '/1.0/cluster/members/m1')).json?.metadata?.status === 'Evacuated', 5000, 'm1 evacuated').catch(() => undefined);
  await lxcOk(t, d2.socket, 'init', 'bb', 'c9');
  t.not(await locationOf(t, 'c9'), 'm1');
  await lxcOk(t, d2.socket, 'delete', 'c9');
  started = Date.now();
  await lxcOk(t, d3.socket, 'cluster', 'restore', 'm1', '--force');
  measured.restore_ms = Date.now() - started;
  const back = await listed(t, d1);
  t.true(back.includes('c1,RUNNING,m1'), back.join('\n'));
  t.true(back.includes('c4,RUNNING,m1'), back.join('\n'));
  t.is(JSON.parse(await lxcOk(t, d1.socket, 'query', '/1.0/instances/c1')).config['volatile.evacuate.origin'], undefined);
  await lxcOk(t, d1.socket, 'stop', 'c4', '--force');
});

serial('evacuating a member with two running and one stopped container (mode migrate), then restoring it', async (t) => {
  const [d1, d2] = d as [NetDaemon, NetDaemon];
  await lxcOk(t, d1.socket, 'delete', 'c5');
  await lxcOk(t, d1.socket, 'launch', 'bb', 'e1', '--target', 'm2');
  await lxcOk(t, d1.socket, 'launch', 'bb', 'e2', '--target', 'm2');
  await lxcOk(t, d1.socket, 'init', 'bb', 'e3', '--target', 'm2');
  let started = Date.now();
  await lxcOk(t, d1.socket, 'query', '--wait', '-X', 'POST', '-d', JSON.stringify({ action: 'evacuate', mode: 'migrate' }), '/1.0/cluster/members/m2/state');
  measured.evacuate_2_running_1_stopped_ms = Date.now() - started;
  const away = await listed(t, d2);
  t.false(away.some((r) => r.endsWith(',m2')), away.join('\n'));
  t.true(away.some((r) => /^e1,RUNNING,m[13]$/.test(r)) && away.some((r) => /^e2,RUNNING,m[13]$/.test(r)) && away.some((r) => /^e3,STOPPED,m[13]$/.test(r)), away.join('\n'));
  started = Date.now();
  await lxcOk(t, d1.socket, 'query', '--wait', '-X', 'POST', '-d', JSON.stringify({ action: 'restore' }), '/1.0/cluster/members/m2/state');
  measured.restore_2_running_1_stopped_ms = Date.now() - started;
  const back = await listed(t, d1);
  for (const row of ['e1,RUNNING,m2', 'e2,RUNNING,m2', 'e3,STOPPED,m2']) t.true(back.includes(row), back.join('\n'));
  const bad = await lxc(d1.socket, 'query', '-X', 'POST', '-d', JSON.stringify({ action: 'evacuate', mode: 'teleport' }), '/1.0/cluster/members/m2/state');
  t.not(bad.status, 0);
  t.regex(bad.stderr, /Unknown evacuation mode/);
  for (const name of ['e1', 'e2', 'e3']) await lxcOk(t, d1.socket, 'delete', name, '--force');
});

serial('a member that is down has its instances listed as errors at once, never a hang; removed by force, its instances go', async (t) => {
  const [d1, d2, d3] = d as [NetDaemon, NetDaemon, NetDaemon];
  // A member holding instances is not removed without force: they live on its disks.
  const refused = await lxc(d1.socket, 'cluster', 'remove', 'm3');
  t.not(refused.status, 0);
  t.regex(refused.stderr, /Member "m3" still holds instances: default\/c\d/);
  await d3.kill9();
  const start = Date.now();
  const rows = await listed(t, d1);
  t.true(Date.now() - start < 8000, `listed in ${Date.now() - start} ms`);
  t.true(rows.some((r) => r.startsWith('c3,ERROR,m3')), rows.join('\n'));
  t.true(rows.includes('c1,RUNNING,m1'));
  await lxcOk(t, d2.socket, 'cluster', 'remove', 'm3', '--force', '--yes');
  const left = await listed(t, d1);
  t.false(left.some((r) => r.endsWith(',m3')), left.join('\n'));
  t.true(left.includes('c1,RUNNING,m1'));
});
