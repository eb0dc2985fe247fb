/**
 * Cluster scenarios: three daemons in network namespaces on a private bridge, each with its etcd member,
 * against a standalone daemon in the same run. Join time; instance config writes; a listing of nine
 * instances spread over the members against nine on one standalone server; a `?target=` request against
 * the same request answered locally; the stall of writes when the etcd leader's member is killed; how long
 * a killed member takes to show OFFLINE and, once restarted, ONLINE; evacuation and restore. The
 * reference's figures (LXD 5.0.2, three members on loopback, measured on these machines) are in the issue.
 */
import { performance } from 'node:perf_hooks';
import { startWithPool, type Daemon } from '../test/helpers/daemon.js';
import { buildBusyboxImage } from '../test/helpers/busybox-image.js';
import { importImage } from '../test/helpers/api.js';
import { clusterNetUnavailable, makeClusterNet, type ClusterNet, type NetDaemon } from '../test/helpers/cluster-net.js';
import { call, median, timed, type Row } from './containers.js';

const SUBNET = '10.19.9';
const WRITES = Number(process.env.BENCH_CLUSTER_WRITES ?? 50);
const READS = Number(process.env.BENCH_CLUSTER_READS ?? 50);
const address = (d: NetDaemon) => `${d.member.address}:8443`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Poll `check` every 20 ms until it holds; answers the milliseconds since `since`. */
async function until(check: () => Promise<boolean>, since: number, boundMs: number, what: string): Promise<number> {
  for (;;) {
    if (await check().catch(() => false)) return performance.now() - since;
    if (performance.now() - since > boundMs) throw new Error(`${what} did not happen within ${boundMs} ms`);
    await sleep(20);
  }
}

const memberStatus = async (d: Daemon, name: string): Promise<string | undefined> =>
  (await d.request('GET', `/1.0/cluster/members/${name}`)).json?.metadata?.status;

/** The join token as `lxc cluster add` prints it: the token operation's metadata, as JSON in base64. */
function joinToken(meta: Record<string, unknown> | undefined): string {
  if (!meta?.secret) throw new Error('POST /1.0/cluster/members answered no join token');
  const { serverName, fingerprint, addresses, secret, expiresAt } = meta;
  return Buffer.from(JSON.stringify({ server_name: serverName, fingerprint, addresses, secret, expires_at: expiresAt })).toString('base64');
}

async function form(net: ClusterNet, image: string): Promise<{ members: NetDaemon[]; joinMs: number[] }> {
  const [first, ...rest] = net.members;
  const d1 = await net.startDaemon(first!, { args: ['--init', 'auto'] });
  await call(d1, 'PATCH', '/1.0', { config: { 'core.https_address': address(d1) } });
  await importImage(d1, image, 'bb');
  await call(d1, 'PUT', '/1.0/cluster', { server_name: 'm1', enabled: true });
  const members = [d1];
  const joinMs: number[] = [];
  for (const [i, member] of rest.entries()) {
    const name = `m${i + 2}`;
    const d = await net.startDaemon(member);
    const token = joinToken((await d1.request('POST', '/1.0/cluster/members', { server_name: name })).json?.metadata?.metadata);
    const required = (await d1.request('GET', '/1.0/cluster')).json?.metadata?.member_config ?? [];
    // A joiner must listen on the address it gives (as `lxd init` sets it before joining).
    await call(d, 'PATCH', '/1.0', { config: { 'core.https_address': address(d) } });
    joinMs.push(await timed(() => call(d, 'PUT', '/1.0/cluster', {
      server_name: name, enabled: true, server_address: address(d), cluster_address: address(d1), cluster_token: token, member_config: required,
    })));
    members.push(d);
  }
  return { members, joinMs };
}

async function createOn(d: Daemon, name: string, target?: string): Promise<void> {
  await call(d, 'POST', `/1.0/instances${target ? `?target=${target}` : ''}`, { name, source: { type: 'image', alias: 'bb' } });
}

/** Median milliseconds of `n` sequential runs of `fn`. */
async function medianOf(n: number, fn: (i: number) => Promise<unknown>): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) times.push(await timed(() => fn(i)));
  return median(times);
}

export async function clusterScenarios(rows: Row[], results: Record<string, unknown>): Promise<void> {
  const missing = clusterNetUnavailable();
  if (missing) {
    rows.push({ scenario: 'cluster', value: `skipped: ${missing}` });
    return;
  }
  const image = buildBusyboxImage('gzip').unified;
  const net = makeClusterNet({ subnet: SUBNET, block: 0, members: 3 });
  const standalone = await startWithPool({ plugins: 'full' });
  try {
    await importImage(standalone, image, 'bb');
    const { members, joinMs } = await form(net, image);
    const [d1, d2, d3] = members as [NetDaemon, NetDaemon, NetDaemon];
    results.cluster_join_ms = joinMs;
    rows.push({ scenario: 'join a member (PUT /1.0/cluster with a token)', value: `${median(joinMs).toFixed(0)} ms (each: ${joinMs.map((ms) => ms.toFixed(0)).join(', ')})`, target: '< 1000 ms (reference 500-1300)' });

    // Nine instances over three members, nine on the standalone server.
    for (let i = 0; i < 9; i++) {
      await createOn(d1, `c${i}`, `m${(i % 3) + 1}`);
      await createOn(standalone, `c${i}`);
    }
    const listCluster = await medianOf(READS, () => call(d1, 'GET', '/1.0/instances?recursion=1'));
    const listAlone = await medianOf(READS, () => call(standalone, 'GET', '/1.0/instances?recursion=1'));
    results.cluster_list_ms = { cluster: listCluster, standalone: listAlone };
    rows.push({ scenario: 'GET /1.0/instances?recursion=1, 9 instances over 3 members (median)', value: `${listCluster.toFixed(1)} ms (standalone ${listAlone.toFixed(1)} ms, ${(listCluster / listAlone).toFixed(2)}x)`, target: '<= 1.5x standalone (reference 7x)' });

    // Config writes: an instance of this member, and one of another member (forwarded).
    const writeLocal = await medianOf(WRITES, (i) => call(d1, 'PATCH', '/1.0/instances/c0', { config: { 'user.n': String(i) } }));
    const writeRemote = await medianOf(WRITES, (i) => call(d1, 'PATCH', '/1.0/instances/c1', { config: { 'user.n': String(i) } }));
    const writeAlone = await medianOf(WRITES, (i) => call(standalone, 'PATCH', '/1.0/instances/c0', { config: { 'user.n': String(i) } }));
    results.cluster_config_write_ms = { local: writeLocal, forwarded: writeRemote, standalone: writeAlone };
    rows.push({ scenario: 'instance config write, 3-member cluster (median)', value: `${writeLocal.toFixed(1)} ms; another member's instance ${writeRemote.toFixed(1)} ms (standalone ${writeAlone.toFixed(1)} ms)`, target: '< 10 ms (reference 33-39)' });

    // GET /1.0 costs little itself, so what shows is the forwarding (m2 asked directly is its floor).
    const direct = await medianOf(READS, () => call(d2, 'GET', '/1.0'));
    const forwarded = await medianOf(READS, () => call(d1, 'GET', '/1.0?target=m2'));
    results.cluster_target_ms = { forwarded, direct };
    rows.push({ scenario: 'GET /1.0?target=m2 through m1 (median)', value: `${forwarded.toFixed(2)} ms (asked of m2 itself ${direct.toFixed(2)} ms)`, target: '< 3 ms (reference 12.9)' });

    // Evacuation with migration of two running and one stopped container of m2, then restore.
    for (const name of ['c1', 'c4']) await call(d1, 'PUT', `/1.0/instances/${name}/state`, { action: 'start' });
    const evac = await timed(() => call(d1, 'POST', '/1.0/cluster/members/m2/state', { action: 'evacuate', mode: 'migrate' })).catch((err: Error) => err);
    const restore = evac instanceof Error ? evac : await timed(() => call(d1, 'POST', '/1.0/cluster/members/m2/state', { action: 'restore' })).catch((err: Error) => err);
    results.cluster_evacuate_ms = evac instanceof Error ? evac.message : { evacuate: evac, restore };
    rows.push({ scenario: 'evacuate m2 (2 running + 1 stopped, migrate), then restore', value: evac instanceof Error ? `failed: ${evac.message}` : `${evac.toFixed(0)} ms, restore ${restore instanceof Error ? `failed: ${restore.message}` : `${restore.toFixed(0)} ms`}`, target: '< 2000 ms each (reference 7000 / 7600)' });
    for (const name of ['c1', 'c4']) await call(d1, 'PUT', `/1.0/instances/${name}/state`, { action: 'stop', force: true }).catch(() => undefined);

    // Kill -9 of the etcd leader's member while writes go on through a survivor.
    const roles = await Promise.all(['m1', 'm2', 'm3'].map(async (name) => ({ name, roles: (await d1.request('GET', `/1.0/cluster/members/${name}`)).json?.metadata?.roles ?? [] })));
    const leaderName = roles.find((m) => m.roles.includes('database-leader'))?.name ?? 'm3';
    const byName: Record<string, NetDaemon> = { m1: d1, m2: d2, m3: d3 };
    const victim = byName[leaderName]!;
    const survivor = victim === d1 ? d2 : d1;
    let writing = true;
    let lastOk = performance.now();
    let worstGap = 0;
    let n = 0;
    const writer = (async () => {
      while (writing) {
        const ok = await survivor.request('PATCH', '/1.0/profiles/default', { config: { 'user.n': String(n++) } }).then((r) => r.status < 400, () => false);
        const now = performance.now();
        if (ok) {
          worstGap = Math.max(worstGap, now - lastOk);
          lastOk = now;
        } else await sleep(10);
      }
    })();
    await sleep(500);
    const killedAt = performance.now();
    await victim.kill9();
    const offline = await until(async () => /^offline$/i.test((await memberStatus(survivor, leaderName)) ?? ''), killedAt, 60_000, `${leaderName} shown offline`);
    await sleep(1000);
    writing = false;
    await writer;
    const restarted = await net.startDaemon(victim.member, { dir: victim.dir });
    const back = performance.now();
    const online = await until(async () => /online/i.test((await memberStatus(survivor, leaderName)) ?? ''), back, 60_000, `${leaderName} shown online again`);
    results.cluster_failover_ms = { leader: leaderName, write_stall: worstGap, offline, online_after_restart: online };
    rows.push({ scenario: `kill -9 of the etcd leader's member (${leaderName}): longest write stall`, value: `${worstGap.toFixed(0)} ms`, target: '< 2500 ms (reference 5700)' });
    rows.push({ scenario: 'killed member shown OFFLINE after', value: `${offline.toFixed(0)} ms`, target: '< 5000 ms (reference 14000-15000)' });
    rows.push({ scenario: 'restarted member shown ONLINE after its daemon started', value: `${online.toFixed(0)} ms`, target: '< 2000 ms (reference ~6700)' });
    await restarted.stop?.().catch(() => undefined);
  } finally {
    await standalone.stop();
    await net.teardown();
  }
}
