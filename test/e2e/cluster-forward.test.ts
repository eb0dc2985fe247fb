/**
 * Forwarding in a real cluster: two daemons, each in its own network namespace with its own etcd
 * member (10.19.3.0/28 on a bridge this test makes), formed with the real `lxc` client. Requests with
 * `?target=`, websockets, events and operations of one member reached through the other; peer headers
 * from an ordinary client ignored; a dead member refused at once; the forwarded latency measured.
 */
import test from 'ava';
import http from 'node:http';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { clusterNetUnavailable, makeClusterNet, type ClusterNet, type NetDaemon } from '../helpers/cluster-net.js';
import { lxcEnv, lxcOk } from '../helpers/clients.js';
import { unixWebsocket, waitFor } from '../helpers/daemon.js';
import { tlsRequest } from '../helpers/tls-client.js';
import { selfSigned } from '../helpers/pki.js';
import { FORWARDED_CALLER_HEADER, encodeCaller } from '../../kernel/cluster/peer-headers.js';

const skip = clusterNetUnavailable();
const serial = skip ? test.serial.skip : test.serial;

let net: ClusterNet;
let d1: NetDaemon;
let d2: NetDaemon;
const address = (d: NetDaemon) => `${d.member.address}:8443`;
const measured: Record<string, number> = {};

/** Setup runs the client outside a test: a failure throws with what lxc said. */
const fake = { is: (actual: unknown, expected: unknown, message?: string) => { if (actual !== expected) throw new Error(message); } };

test.before(async () => {
  if (skip) return;
  net = makeClusterNet({ subnet: '10.19.3', block: 0, members: 2 });
  [d1, d2] = await Promise.all(net.members.map((m) => net.startDaemon(m)));
  // The cluster as a user makes it (as test/e2e/cluster-members.test.ts does): enable on m1, a token, m2 joins
  // with it as `lxd init --preseed` sends it. Every member listens on all its addresses and names its own.
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
  if (Object.keys(measured).length) console.log(`forwarding measurements (ms): ${JSON.stringify(measured)}`);
});

serial('GET /1.0/resources?target=m2 through m1 is answered by m2; lxc info --target m2 too', async (t) => {
  const resources = await d1.request('GET', '/1.0/resources?target=m2');
  t.is(resources.status, 200, resources.body);
  t.truthy(resources.json.metadata.memory);
  const info = await d1.request('GET', '/1.0?target=m2');
  t.is(info.json.metadata.environment.server_name, 'm2');
  t.is((await d1.request('GET', '/1.0')).json.metadata.environment.server_name, 'm1');
  t.regex(await lxcOk(t, d1.socket, 'info', '--target', 'm2'), /server_name: m2/);
});

serial('the forwarded ?target= request costs no more than its two hops (target: under 3 ms)', async (t) => {
  const quantiles = async (get: () => Promise<number>) => {
    for (let i = 0; i < 30; i++) await get();
    const times: number[] = [];
    for (let i = 0; i < 300; i++) times.push(await get());
    t.false(times.includes(-1));
    times.sort((a, b) => a - b);
    return { p25: times[75]!, median: times[150]! };
  };
  const timed = (request: (done: (res: http.IncomingMessage) => void) => http.ClientRequest) => new Promise<number>((resolve, reject) => {
    const started = performance.now();
    request((res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode === 200 ? performance.now() - started : -1));
    }).on('error', reject);
  });
  const unix = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const overUnix = (d: NetDaemon, path: string) => () => timed((done) => http.get({ socketPath: d.socket, path, agent: unix }, done));
  // The second hop alone: this process asking m2 as a member does (the cluster certificate, a kept connection).
  const { readFileSync } = await import('node:fs');
  const https = await import('node:https');
  const peer = new https.Agent({ keepAlive: true, maxSockets: 1, noDelay: true, rejectUnauthorized: false,
    cert: readFileSync(path.join(d1.dir, 'server.crt')), key: readFileSync(path.join(d1.dir, 'server.key')) });
  const asPeer = () => timed((done) => https.get({ host: d2.member.address, port: 8443, path: '/1.0', agent: peer }, done));
  const onM1 = await quantiles(overUnix(d1, '/1.0'));
  const onM2 = await quantiles(overUnix(d2, '/1.0'));
  const hop = await quantiles(asPeer);
  const forwarded = await quantiles(overUnix(d1, '/1.0?target=m2'));
  unix.destroy();
  peer.destroy();
  Object.assign(measured, { m1Median: onM1.median, m2Median: onM2.median, peerHopMedian: hop.median, forwardedMedian: forwarded.median, forwardedP25: forwarded.p25 });
  t.log(`GET /1.0 median (p25), ms: on m1 ${onM1.median.toFixed(2)} (${onM1.p25.toFixed(2)}), on m2 ${onM2.median.toFixed(2)} (${onM2.p25.toFixed(2)}), `
    + `m2 as a peer over TLS ${hop.median.toFixed(2)} (${hop.p25.toFixed(2)}), forwarded from m1 to m2 ${forwarded.median.toFixed(2)} (${forwarded.p25.toFixed(2)})`);
  // Other tests share this 2-core machine and a forwarded request wakes two more processes than a local one (each
  // wake-up waits for a core there): the figure is held against its two hops measured now, in the lower quartile
  // (the stable one). A TLS handshake per request would be far above this. The 3 ms target is a bench figure
  // (docs/decisions/0057 has the measurements).
  t.true(forwarded.p25 < Math.max(5, 2.5 * (onM1.p25 + hop.p25)), `forwarded p25 ${forwarded.p25.toFixed(2)} ms`);
});

serial('lxc monitor on m1 sees what happens on m2, with m2 as its location; a forwarded events socket too', async (t) => {
  const monitor = spawn('lxc', ['monitor', '--type', 'lifecycle', '--format', 'json'], { env: lxcEnv(d1.socket) });
  let out = '';
  monitor.stdout.on('data', (c) => (out += c));
  const forwarded = await unixWebsocket(d1.socket, '/1.0/events?type=lifecycle&target=m2');
  const viaTarget: any[] = [];
  forwarded.on('message', (data) => viaTarget.push(JSON.parse(String(data))));
  try {
    let n = 0;
    await waitFor(async () => {
      await lxcOk(t, d2.socket, 'profile', 'create', `seen-${++n}`);
      await new Promise((r) => setTimeout(r, 200));
      return out.includes('profile-created');
    }, 15_000, 'lxc monitor on m1 to print the profile created on m2');
    const event = JSON.parse(out.split('\n').find((l) => l.includes('profile-created'))!);
    t.is(event.location, 'm2');
    await waitFor(() => viaTarget.some((e) => e.metadata?.action === 'profile-created' && e.location === 'm2'), 5000, 'the forwarded socket');
  } finally {
    monitor.kill();
    forwarded.close();
  }
});

serial('an operation of m2 is listed, read and cancelled through m1', async (t) => {
  // A join token is an operation of the member that made it, cancellable.
  const made = await d2.request('POST', '/1.0/cluster/members', { server_name: 'spare' });
  t.is(made.status, 202, made.body);
  const id = made.json.metadata.id as string;
  t.is(made.json.metadata.location, 'm2');
  const list = await d1.request('GET', '/1.0/operations?recursion=1');
  t.true(Object.values(list.json.metadata as Record<string, any[]>).flat().some((op) => op.id === id && op.location === 'm2'), list.body);
  t.regex(await lxcOk(t, d1.socket, 'operation', 'list'), new RegExp(id));
  const one = await d1.request('GET', `/1.0/operations/${id}`);
  t.is(one.status, 200, one.body);
  t.is(one.json.metadata.location, 'm2');
  await lxcOk(t, d1.socket, 'operation', 'delete', id);
  const after = await d2.request('GET', `/1.0/operations/${id}`);
  t.not(after.json?.metadata?.status, 'Running', after.body);
});

serial('peer headers from an ordinary trusted client are ignored, here and on the member it reaches', async (t) => {
  const client = selfSigned(mkdtempSync(path.join(tmpdir(), 'corral-fwd-')), 'ordinary');
  const added = await d1.request('POST', '/1.0/certificates', { type: 'client', certificate: client.base64, name: 'ordinary' });
  t.true(added.status === 200 || added.status === 201, added.body);
  const forged = { [FORWARDED_CALLER_HEADER]: encodeCaller({ trusted: true, projects: ['nothing'], requestor: { username: 'x', protocol: 'tls', address: 'x' } }, 'm2') };
  const here = await tlsRequest({ host: d1.member.address, port: 8443 }, client, 'GET', '/1.0/operations/none', undefined, forged);
  t.is(here.status, 404, `the forged restriction is not applied: ${here.body}`);
  const there = await tlsRequest({ host: d1.member.address, port: 8443 }, client, 'GET', '/1.0/operations/none?target=m2', undefined, forged);
  t.is(there.status, 404, there.body);
});

serial('a member that stops answering (its link cut) is a 503 within the bounds, never a hang; it comes back', async (t) => {
  // Warm the pooled connection first: a request on a kept connection has no connect bound, so the member's going
  // offline (its lease lapsing) is what ends it.
  t.is((await d1.request('GET', '/1.0?target=m2')).status, 200);
  const cut = d2.member.exec(['ip', 'link', 'set', 'eth0', 'down']);
  t.is(cut.status, 0, cut.stderr);
  try {
    const started = performance.now();
    const answer = await d1.request('GET', '/1.0/resources?target=m2');
    measured.silentMember = performance.now() - started;
    t.is(answer.status, 503, answer.body);
    t.regex(answer.json.error, /"m2"/);
    t.true(measured.silentMember < 10_000, `${measured.silentMember} ms`);
    const again = await d1.request('GET', '/1.0?target=m2');
    t.is(again.status, 503, 'offline now: refused without trying');
  } finally {
    d2.member.exec(['ip', 'link', 'set', 'eth0', 'up']);
  }
  await waitFor(async () => (await d1.request('GET', '/1.0?target=m2')).status === 200, 30_000, 'm2 answering through m1 again');
});

serial('a dead member is refused at once, naming it, then shown offline', async (t) => {
  await d2.kill9();
  const started = performance.now();
  const refused = await d1.request('GET', '/1.0/resources?target=m2');
  measured.deadMember = performance.now() - started;
  t.is(refused.status, 503, refused.body);
  t.regex(refused.json.error, /"m2"/);
  t.true(measured.deadMember < 1000, `${measured.deadMember} ms`);
  await waitFor(async () => (await d1.request('GET', '/1.0?target=m2')).json?.error?.includes('offline') ?? false, 30_000, 'm2 offline');
  const listing = await d1.request('GET', '/1.0/operations');
  t.is(listing.status, 200, 'listings leave an offline member out');
});
