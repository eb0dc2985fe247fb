/**
 * The security figures over real TLS: a certificate restricted to project `p1` reaching into
 * `default` by every route family (instances, images, profiles, storage, operations, events, and the
 * websocket of another project's exec, even holding its secret); PKI mode with a revoked
 * certificate, one from another CA and a self-signed one. Every attempt must be refused; the
 * counts are printed.
 */
import test from 'ava';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { killContainers, startDaemon, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { callAndWait, importImage } from '../helpers/api.js';
import { selfSigned, TestCa, type ClientCert } from '../helpers/pki.js';
import { freePort, tlsRequest, tlsWebsocket, type TlsTarget } from '../helpers/tls-client.js';

const certDir = mkdtempSync(path.join(tmpdir(), 'corral-certs-'));
let image: BusyboxImage;
let d: Daemon;
let target: TlsTarget;
const dirs: string[] = [certDir];
/** The client restricted to `p1`. */
let tenant: ClientCert;

test.before(async () => {
  image = buildBusyboxImage('gzip');
  d = await startDaemon({ plugins: 'full', args: ['--init', 'auto'] });
  await waitFor(async () => (await d.request('GET', '/1.0/storage-pools')).json?.metadata?.length === 1, 10000, 'the init pool');
  const port = await freePort();
  target = { host: '127.0.0.1', port };
  const set = await d.request('PATCH', '/1.0', { config: { 'core.https_address': `127.0.0.1:${port}` } });
  if (set.status !== 200) throw new Error(set.body);
});

test.after.always(async () => {
  if (d) killContainers(d.dir);
  await stopDaemons();
  if (image) rmSync(image.dir, { recursive: true, force: true });
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

type Attempt = [family: string, method: string, url: string, body?: unknown];

test.serial('certificate_project: a restricted certificate reaches no other project by any route family', async (t) => {
  const fingerprint = await importImage(d, image.unified, 'bb');
  t.is((await d.request('POST', '/1.0/projects', { name: 'p1', config: { 'features.images': 'false' } })).status, 200);
  t.is((await d.request('POST', '/1.0/projects', { name: 'p2' })).status, 200);
  t.is((await d.request('PUT', '/1.0/profiles/default?project=p1', { config: {}, devices: { root: { type: 'disk', path: '/', pool: 'default' } } })).status, 200);
  const created = await callAndWait(d, 'POST', '/1.0/instances', { name: 'victim', source: { type: 'image', alias: 'bb' } });
  t.is(created.op?.status, 'Success', created.op?.err);
  t.is((await callAndWait(d, 'PUT', '/1.0/instances/victim/state', { action: 'start' })).op?.status, 'Success');
  // An exec in `default` waiting for its websockets: its id and secrets are what an attacker would want.
  const exec = await d.request('POST', '/1.0/instances/victim/exec', { command: ['sleep', '60'], 'wait-for-websocket': true, interactive: false });
  t.is(exec.status, 202, exec.body);
  const execOp = exec.json.metadata;
  const secret = execOp.metadata.fds['0'] as string;

  tenant = selfSigned(certDir, 'tenant');
  t.is((await d.request('POST', '/1.0/certificates', { type: 'client', name: 'tenant', certificate: tenant.base64, restricted: true, projects: ['p1'] })).status, 200);
  const as = (method: string, url: string, body?: unknown) => tlsRequest(target, tenant, method, url, body);

  // What the tenant may do works: the refusals below are about the project, not a broken client.
  t.is((await as('GET', '/1.0/instances?project=p1')).status, 200);
  const own = await as('POST', '/1.0/instances?project=p1', { name: 'mine', source: { type: 'image', alias: 'bb' } });
  t.is(own.status, 202, own.body);
  t.is((await tlsRequest(target, tenant, 'GET', `${own.json.operation}/wait?timeout=60&project=p1`)).json.metadata.status, 'Success');
  const ownEvents = await tlsWebsocket(target, tenant, '/1.0/events?project=p1');
  t.truthy(ownEvents.ws, `events of p1: ${ownEvents.status} ${ownEvents.body}`);
  ownEvents.ws?.close();

  const attempts: Attempt[] = [
    ['instances', 'GET', '/1.0/instances'],
    ['instances', 'GET', '/1.0/instances?project=default'],
    ['instances', 'GET', '/1.0/instances?project=p1&all-projects=true'],
    ['instances', 'GET', '/1.0/containers'],
    ['instances', 'GET', '/1.0/instances/victim'],
    ['instances', 'GET', '/1.0/instances/victim?project=p1'],
    ['instances', 'GET', '/1.0/instances/victim/state?project=p1'],
    ['instances', 'PUT', '/1.0/instances/victim/state', { action: 'stop', force: true }],
    ['instances', 'PUT', '/1.0/instances/victim/state?project=p1', { action: 'stop', force: true }],
    ['instances', 'POST', '/1.0/instances/victim/exec', { command: ['true'] }],
    ['instances', 'POST', '/1.0/instances/victim/exec?project=p1', { command: ['true'] }],
    ['instances', 'GET', '/1.0/instances/victim/files?path=/etc/passwd&project=p1'],
    ['instances', 'GET', '/1.0/instances/victim/logs?project=p1'],
    ['instances', 'PATCH', '/1.0/instances/victim?project=p1', { config: { 'user.x': '1' } }],
    ['instances', 'DELETE', '/1.0/instances/victim'],
    ['instances', 'DELETE', '/1.0/instances/victim?project=p1'],
    ['instances', 'POST', '/1.0/instances?project=default', { name: 'intruder', source: { type: 'image', alias: 'bb' } }],
    ['instances', 'POST', '/1.0/instances/victim?project=p1', { name: 'stolen' }],
    ['images', 'GET', `/1.0/images/${fingerprint}`],
    ['images', 'GET', '/1.0/images/aliases'],
    ['images', 'GET', '/1.0/images/aliases/bb'],
    ['images', 'GET', `/1.0/images/${fingerprint}/export`],
    ['images', 'DELETE', `/1.0/images/${fingerprint}`],
    ['images', 'PATCH', `/1.0/images/${fingerprint}`, { public: true }],
    ['profiles', 'GET', '/1.0/profiles'],
    ['profiles', 'GET', '/1.0/profiles/default'],
    ['profiles', 'PUT', '/1.0/profiles/default', { config: {}, devices: {} }],
    ['profiles', 'POST', '/1.0/profiles', { name: 'evil' }],
    ['profiles', 'DELETE', '/1.0/profiles/default'],
    ['storage', 'GET', '/1.0/storage-pools/default/volumes'],
    ['storage', 'GET', '/1.0/storage-pools/default/volumes/container/victim'],
    ['storage', 'GET', '/1.0/storage-pools/default/volumes/container/victim?project=p1'],
    ['storage', 'POST', '/1.0/storage-pools/default/volumes/custom', { name: 'v', type: 'custom' }],
    ['storage', 'DELETE', '/1.0/storage-pools/default'],
    ['operations', 'GET', `/1.0/operations/${execOp.id}`],
    ['operations', 'GET', `/1.0/operations/${execOp.id}?project=p1`],
    ['operations', 'GET', `/1.0/operations/${execOp.id}/wait?timeout=0&project=p1`],
    ['operations', 'DELETE', `/1.0/operations/${execOp.id}?project=p1`],
    ['server', 'PUT', '/1.0?project=p1', { config: { 'core.trust_password': 'x' } }],
    ['server', 'GET', '/1.0/warnings?project=p1'],
    ['server', 'POST', '/1.0/certificates?project=p1', { type: 'client', certificate: selfSigned(certDir, 'friend').base64 }],
  ];
  const counts: Record<string, number> = {};
  /** Every attempt that got through, listed at once. */
  const leaks: string[] = [];
  for (const [family, method, url, body] of attempts) {
    const res = await as(method, url, body).catch((err: Error) => ({ status: 0, body: `${err.message}`, json: undefined as any }));
    if ((res.status !== 403 && res.status !== 404) || res.json?.type !== 'error') leaks.push(`${method} ${url}: ${res.status} ${res.body.slice(0, 120)}`);
    else counts[family] = (counts[family] ?? 0) + 1;
  }

  // Listings shared by projects answer, as the reference's do, with nothing of `default` in them
  // (decision 0025); so do event streams, which carry only the tenant's projects (test/e2e/restricted-access).
  const listed = async (url: string) => {
    const res = await as('GET', url);
    t.is(res.status, 200, `${url}: ${res.body}`);
    return res.body;
  };
  t.false((await listed('/1.0/images')).includes(fingerprint), 'a private image of default is not listed');
  t.false((await listed('/1.0/storage-pools?recursion=1')).includes('victim'));
  for (const url of ['/1.0/operations', '/1.0/operations?project=p1&all-projects=true', '/1.0/operations?recursion=1&all-projects=true']) {
    t.false((await listed(url)).includes(execOp.id), `${url} hides the exec of default`);
  }
  t.true((await listed('/1.0/images?project=p1')).includes(fingerprint), 'p1 uses the images of default (features.images=false)');

  const sockets: [string, string][] = [
    ['exec websocket', `/1.0/operations/${execOp.id}/websocket?secret=${secret}`],
    ['exec websocket', `/1.0/operations/${execOp.id}/websocket?secret=${secret}&project=p1`],
    ['exec websocket', `/1.0/operations/${execOp.id}/websocket?secret=${'0'.repeat(64)}&project=p1`],
  ];
  for (const [family, url] of sockets) {
    const res = await tlsWebsocket(target, tenant, url);
    res.ws?.close();
    if (res.status !== 403 && res.status !== 404) leaks.push(`websocket ${url}: ${res.status ?? 'opened'}`);
    else counts[family] = (counts[family] ?? 0) + 1;
  }
  t.deepEqual(leaks, [], 'attempts that were not refused');

  // Nothing in `default` moved.
  const victim = (await d.request('GET', '/1.0/instances/victim')).json.metadata;
  t.is(victim.status, 'Running');
  t.deepEqual(victim.config['user.x'], undefined);
  t.is((await d.request('GET', `/1.0/operations/${execOp.id}`)).json.metadata.status, 'Running');
  t.is((await d.request('GET', '/1.0/profiles/evil')).status, 404);
  t.is((await d.request('GET', `/1.0/images/${fingerprint}`)).json.metadata.public, false);

  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  t.log(`restricted certificate: ${total} attempts refused (${Object.entries(counts).map(([f, n]) => `${f} ${n}`).join(', ')})`);
  await d.request('DELETE', `/1.0/operations/${execOp.id}`);
  await callAndWait(d, 'PUT', '/1.0/instances/victim/state', { action: 'stop', force: true });
});

test.serial('a metrics certificate reaches /1.0/metrics and nothing else', async (t) => {
  const meter = selfSigned(certDir, 'meter');
  t.is((await d.request('POST', '/1.0/certificates', { type: 'metrics', name: 'prometheus', certificate: meter.base64 })).status, 200);
  const metrics = await tlsRequest(target, meter, 'GET', '/1.0/metrics');
  t.is(metrics.status, 200, metrics.body.slice(0, 200));
  t.regex(metrics.body, /^# (HELP|TYPE) lxd_/m);
  let refused = 0;
  // Images are listed to anyone, as the reference lists them to a metrics certificate too: the public ones (none here).
  const images = await tlsRequest(target, meter, 'GET', '/1.0/images');
  t.is(images.status, 200);
  t.deepEqual(images.json.metadata, []);
  for (const [method, url] of [['GET', '/1.0/instances'], ['GET', '/1.0/instances/victim'], ['GET', '/1.0/images/aliases'], ['GET', '/1.0/profiles'],
    ['GET', '/1.0/storage-pools'], ['GET', '/1.0/operations'], ['GET', '/1.0/certificates'], ['PATCH', '/1.0'], ['POST', '/1.0/certificates']] as const) {
    const res = await tlsRequest(target, meter, method, url, method === 'GET' ? undefined : {});
    t.is(res.status, 403, `${method} ${url}`);
    refused++;
  }
  const events = await tlsWebsocket(target, meter, '/1.0/events');
  t.is(events.status, 403);
  t.log(`metrics certificate: ${refused + 1} attempts refused`);
});

test.serial('a restricted certificate reaches no other project through /1.0/projects', async (t) => {
  const as = (method: string, url: string, body?: unknown) => tlsRequest(target, tenant, method, url, body);
  const attempts: [string, string, unknown?][] = [
    ['GET', '/1.0/projects/p2?project=p1'],
    ['PATCH', '/1.0/projects/p2?project=p1', { config: { 'limits.instances': '100' } }],
    ['POST', '/1.0/projects/p2?project=p1', { name: 'p3' }],
    ['DELETE', '/1.0/projects/p2?project=p1'],
    ['POST', '/1.0/projects?project=p1', { name: 'p9' }],
    ['GET', '/1.0/projects/default/state?project=p1'],
  ];
  const leaks: string[] = [];
  for (const [method, url, body] of attempts) {
    const res = await as(method, url, body);
    if (res.status !== 403 && res.status !== 404) leaks.push(`${method} ${url}: ${res.status}`);
  }
  t.deepEqual(leaks, []);
  t.deepEqual((await as('GET', '/1.0/projects?project=p1')).json?.metadata, ['/1.0/projects/p1'], 'a restricted client lists only its projects');
  t.is((await d.request('GET', '/1.0/projects/p2')).status, 200);
});

test.serial('auth_pki and trust_ca_certificates: only certificates of server.ca count, revoked ones never, CA trust needs core.trust_ca_certificates', async (t) => {
  const ca = new TestCa('good');
  const evil = new TestCa('evil');
  dirs.push(ca.dir, evil.dir);
  const stored = ca.issue('stored');
  const unstored = ca.issue('unstored');
  const revokedStored = ca.issue('revoked-stored');
  const revoked = ca.issue('revoked');
  const foreign = evil.issue('foreign');
  const self = selfSigned(certDir, 'self');
  ca.revoke(revokedStored);
  ca.revoke(revoked);

  const dir = mkdtempSync(path.join(tmpdir(), 'corral-pki-'));
  dirs.push(dir);
  writeFileSync(path.join(dir, 'server.ca'), ca.cert);
  writeFileSync(path.join(dir, 'ca.crl'), ca.crl());
  const pki = await startDaemon({ plugins: 'warnings,certificates', dir });
  const port = await freePort();
  const at = { host: '127.0.0.1', port };
  t.is((await pki.request('PATCH', '/1.0', { config: { 'core.https_address': `127.0.0.1:${port}` } })).status, 200);
  for (const c of [stored, revokedStored, foreign, self]) {
    t.is((await pki.request('POST', '/1.0/certificates', { type: 'client', certificate: c.base64 })).status, 200, c.name);
  }
  const auth = async (c: ClientCert) => (await tlsRequest(at, c, 'GET', '/1.0')).json.metadata.auth;
  const refusedCount = async (c: ClientCert): Promise<number> => {
    let n = 0;
    for (const [method, url] of [['GET', '/1.0/certificates'], ['GET', '/1.0/operations'], ['DELETE', `/1.0/certificates/${stored.fingerprint}`]]) {
      const res = await tlsRequest(at, c, method!, url!);
      t.is(res.status, 403, `${c.name}: ${method} ${url}`);
      n++;
    }
    const ws = await tlsWebsocket(at, c, '/1.0/events');
    t.is(ws.status, 403, `${c.name}: events`);
    return n + 1;
  };

  t.is(await auth(stored), 'trusted');
  const counts: Record<string, number> = { revoked: 0, 'other CA': 0, 'self-signed': 0, 'CA-signed, not stored': 0 };
  counts['CA-signed, not stored'] += await refusedCount(unstored);
  counts.revoked += await refusedCount(revokedStored);
  counts['other CA'] += await refusedCount(foreign);
  counts['self-signed'] += await refusedCount(self);

  // trust_ca_certificates: the CA vouches for its clients, except the revoked ones.
  t.is((await pki.request('PATCH', '/1.0', { config: { 'core.trust_ca_certificates': 'true' } })).status, 200);
  t.is(await auth(unstored), 'trusted');
  t.is((await tlsRequest(at, unstored, 'GET', '/1.0/certificates')).status, 200);
  counts.revoked += await refusedCount(revoked);
  counts.revoked += await refusedCount(revokedStored);
  counts['other CA'] += await refusedCount(foreign);
  counts['self-signed'] += await refusedCount(self);
  t.log(`PKI mode: ${Object.entries(counts).map(([k, n]) => `${k} ${n}`).join(', ')} attempts refused`);
  await pki.stop();
});
