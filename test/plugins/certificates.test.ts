/**
 * The certificates plugin over real TLS connections: the trust store API, the trust password
 * (hashed, write-only, never logged, compared in constant time), add tokens, metrics-only and
 * expired certificates, CORS headers and the PROXY protocol from trusted proxies.
 */
import test from 'ava';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { connect } from 'node:net';
import tls from 'node:tls';
import path from 'node:path';
import { collect, projectRoot, startDaemon, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { selfSigned, TestCa, type ClientCert } from '../helpers/pki.js';
import { freePort, tlsRequest, tlsWebsocket, type TlsTarget } from '../helpers/tls-client.js';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';

const PASSWORD = 'Sesame-7f3a-correct-horse';
const certDir = mkdtempSync(path.join(tmpdir(), 'corral-certs-'));
const alice = selfSigned(certDir, 'alice');
const bob = selfSigned(certDir, 'bob');
const mallory = selfSigned(certDir, 'mallory');
const meter = selfSigned(certDir, 'meter');

let daemon: Daemon;
let target: TlsTarget;

test.before(async () => {
  daemon = await startDaemon({ plugins: 'warnings,certificates' });
  const port = await freePort();
  target = { host: '127.0.0.1', port };
  const res = await daemon.request('PATCH', '/1.0', { config: { 'core.https_address': `127.0.0.1:${port}` } });
  if (res.status !== 200) throw new Error(res.body);
});
test.after.always(stopDaemons);

const as = (client: ClientCert | undefined, method: string, url: string, body?: unknown, headers?: Record<string, string>) => tlsRequest(target, client, method, url, body, headers);

test.serial('the server key is private (mode 0600) and GET /1.0 shows the server certificate', async (t) => {
  t.is(statSync(path.join(daemon.dir, 'server.key')).mode & 0o777, 0o600);
  const info = (await daemon.request('GET', '/1.0')).json.metadata;
  t.true(info.environment.certificate.startsWith('-----BEGIN CERTIFICATE-----'));
  t.regex(info.environment.certificate_fingerprint, /^[0-9a-f]{64}$/);
  t.deepEqual(info.environment.addresses, [`${target.host}:${target.port}`]);
});

test.serial('an untrusted client reads GET / and the untrusted GET /1.0, and nothing else', async (t) => {
  t.is((await as(mallory, 'GET', '/')).status, 200);
  for (const who of [mallory, undefined]) {
    const info = await as(who, 'GET', '/1.0');
    t.is(info.status, 200);
    t.is(info.json.metadata.auth, 'untrusted');
    t.is(info.json.metadata.config, undefined, 'no server config for strangers');
    t.is(info.json.metadata.environment, undefined);
  }
  const refused: [string, string, unknown?][] = [
    ['GET', '/1.0/certificates'], ['GET', '/1.0/certificates?recursion=1'], ['GET', `/1.0/certificates/${alice.fingerprint}`],
    ['PUT', '/1.0', { config: {} }], ['PATCH', '/1.0', { config: { 'core.trust_password': 'x' } }],
    ['GET', '/1.0/operations'], ['GET', '/1.0/warnings'],
    ['POST', '/1.0/certificates', { type: 'client' }], ['POST', '/1.0/certificates', { type: 'client', password: '' }],
    ['POST', '/1.0/certificates', { type: 'client', certificate: mallory.base64 }],
    ['POST', '/1.0/certificates', { type: 'client', token: true }],
  ];
  let count = 0;
  for (const [method, url, body] of refused) {
    const res = await as(mallory, method, url, body);
    t.is(res.status, 403, `${method} ${url}`);
    t.is(res.json.error_code, 403);
    count++;
  }
  const events = await tlsWebsocket(target, mallory, '/1.0/events');
  t.is(events.status, 403);
  count++;
  t.log(`untrusted certificate: ${count} attempts refused`);
});

test.serial('the trust password is write-only, hashed, never logged, and lets a client add itself', async (t) => {
  // Password trust is off until a password is set.
  t.is((await as(alice, 'POST', '/1.0/certificates', { type: 'client', password: PASSWORD })).status, 403);

  t.is((await daemon.request('PATCH', '/1.0', { config: { 'core.trust_password': PASSWORD } })).status, 200);
  const shown = (await daemon.request('GET', '/1.0')).json.metadata.config;
  t.is(shown['core.trust_password'], true, 'shown as true, never the value');

  // A full PUT echoing `true` (what `lxc config edit` and `lxc config set` send) keeps the password.
  const current = (await daemon.request('GET', '/1.0')).json.metadata;
  t.is((await daemon.request('PUT', '/1.0', { config: { ...current.config, 'core.https_allowed_origin': 'https://ui.example' } })).status, 200);

  // Wrong passwords of every length are refused alike.
  for (const wrong of ['', 'x', PASSWORD.slice(0, -1), `${PASSWORD}x`, PASSWORD.toUpperCase(), 'a'.repeat(4096)]) {
    if (wrong === '') continue;
    t.is((await as(alice, 'POST', '/1.0/certificates', { type: 'client', password: wrong })).status, 403, `length ${wrong.length}`);
  }
  const added = await as(alice, 'POST', '/1.0/certificates', { type: 'client', password: PASSWORD });
  t.is(added.status, 200, added.body);
  t.is(added.headers.location, `/1.0/certificates/${alice.fingerprint}`);
  const entry = (await daemon.request('GET', `/1.0/certificates/${alice.fingerprint}`)).json.metadata;
  t.like(entry, { name: 'alice', type: 'client', restricted: false, projects: [], fingerprint: alice.fingerprint });
  t.is((await as(alice, 'GET', '/1.0')).json.metadata.auth, 'trusted');
  t.is((await as(alice, 'POST', '/1.0/certificates', { type: 'client', password: PASSWORD })).status, 400, 'already trusted');

  // Neither the log nor the database holds the clear text.
  const files = readdirSync(daemon.dir).filter((f) => /^corral\.(log|db)/.test(f));
  t.true(files.length >= 2);
  for (const file of files) t.false(readFileSync(path.join(daemon.dir, file)).includes(PASSWORD), `${file} holds the password`);
  t.false(daemon.output().includes(PASSWORD));
});

test('the password comparison runs on equal-length derived keys with timingSafeEqual', (t) => {
  const source = readFileSync(path.join(projectRoot, 'plugins/certificates/password.ts'), 'utf8');
  t.regex(source, /timingSafeEqual\(offered, expected\)/);
  t.regex(source, /offered\.length === expected\.length/);
  t.notRegex(source, /===\s*stored|stored\s*===/);
});

test.serial('certificates: list, show by prefix, PUT/PATCH with ETag, DELETE, lifecycle events', async (t) => {
  const ws = await daemon.websocket('/1.0/events?type=lifecycle');
  const events = collect(ws);
  const add = await daemon.request('POST', '/1.0/certificates', { type: 'client', name: 'bob', certificate: bob.cert });
  t.is(add.status, 200, add.body);
  t.is((await daemon.request('POST', '/1.0/certificates', { type: 'client', name: 'again', certificate: bob.base64 })).status, 409);
  t.is((await daemon.request('POST', '/1.0/certificates', { type: 'client', certificate: 'not a certificate' })).status, 400);
  t.is((await daemon.request('POST', '/1.0/certificates', { type: 'root', certificate: mallory.base64 })).status, 400);
  t.is((await daemon.request('POST', '/1.0/certificates', { type: 'client' })).status, 400, 'no certificate at all');

  const list = (await daemon.request('GET', '/1.0/certificates')).json.metadata;
  t.true(list.includes(`/1.0/certificates/${bob.fingerprint}`));
  const full = (await daemon.request('GET', '/1.0/certificates?recursion=1')).json.metadata;
  t.deepEqual(Object.keys(full[0]), ['name', 'type', 'restricted', 'projects', 'certificate', 'fingerprint']);

  const shown = await daemon.request('GET', `/1.0/certificates/${bob.fingerprint.slice(0, 12)}`);
  t.is(shown.json.metadata.fingerprint, bob.fingerprint);
  t.is((await daemon.request('GET', '/1.0/certificates/ffffffffffff0000')).status, 404);

  const etag = shown.headers.etag as string;
  t.is((await daemon.request('PATCH', `/1.0/certificates/${bob.fingerprint}`, { name: 'x' }, { 'If-Match': '"nope"' })).status, 412);
  t.is((await daemon.request('PATCH', `/1.0/certificates/${bob.fingerprint}`, { name: 'robert', restricted: true, projects: ['p1', 'p2'] }, { 'If-Match': etag })).status, 200);
  t.like((await daemon.request('GET', `/1.0/certificates/${bob.fingerprint}`)).json.metadata, { name: 'robert', restricted: true, projects: ['p1', 'p2'] });
  t.is((await daemon.request('PUT', `/1.0/certificates/${bob.fingerprint}`, { name: 'robert', type: 'bogus' })).status, 400);
  t.is((await daemon.request('PUT', `/1.0/certificates/${bob.fingerprint}`, { name: 'robert', type: 'client', restricted: false })).status, 200);
  t.like((await daemon.request('GET', `/1.0/certificates/${bob.fingerprint}`)).json.metadata, { restricted: false, projects: [] });

  t.is((await daemon.request('DELETE', `/1.0/certificates/${bob.fingerprint}`)).status, 200);
  t.is((await daemon.request('GET', `/1.0/certificates/${bob.fingerprint}`)).status, 404);
  await waitFor(() => events.filter((e) => e.metadata.source === `/1.0/certificates/${bob.fingerprint}`).length >= 4, 5000, 'lifecycle events');
  t.deepEqual(events.filter((e) => e.metadata.source === `/1.0/certificates/${bob.fingerprint}`).map((e) => e.metadata.action),
    ['certificate-created', 'certificate-updated', 'certificate-updated', 'certificate-deleted']);
  ws.close();
});

test.serial('certificate_update: a new certificate replaces an entry; certificate_self_renewal: a restricted client renews only its own', async (t) => {
  const renewed = selfSigned(certDir, 'carol-renewed');
  const carol = selfSigned(certDir, 'carol');
  t.is((await daemon.request('POST', '/1.0/certificates', { type: 'client', name: 'carol', certificate: carol.base64, restricted: true, projects: ['p1'] })).status, 200);
  // Restricted: cannot widen itself, cannot touch others, cannot add certificates.
  t.is((await as(carol, 'PUT', `/1.0/certificates/${carol.fingerprint}?project=p1`, { name: 'carol', type: 'client', restricted: false, projects: [] })).status, 403);
  t.is((await as(carol, 'DELETE', `/1.0/certificates/${alice.fingerprint}?project=p1`)).status, 403);
  t.is((await as(carol, 'POST', '/1.0/certificates?project=p1', { type: 'client', certificate: mallory.base64 })).status, 403);
  const renew = await as(carol, 'PUT', `/1.0/certificates/${carol.fingerprint}?project=p1`, { name: 'carol', type: 'client', restricted: true, projects: ['p1'], certificate: renewed.base64 });
  t.is(renew.status, 200, renew.body);
  t.is((await daemon.request('GET', `/1.0/certificates/${carol.fingerprint}`)).status, 404);
  t.like((await daemon.request('GET', `/1.0/certificates/${renewed.fingerprint}`)).json.metadata, { name: 'carol', restricted: true, projects: ['p1'] });
  t.is((await as(carol, 'GET', '/1.0?project=p1')).json.metadata.auth, 'untrusted', 'the old certificate is no longer trusted');
  t.is((await as(renewed, 'GET', '/1.0/certificates?project=p1')).status, 200);
  t.is((await as(renewed, 'DELETE', `/1.0/certificates/${renewed.fingerprint}?project=p1`)).status, 200, 'a client may remove itself');
});

test.serial('certificate_token: a token adds the redeeming client with the name and projects it was issued for, once', async (t) => {
  const dave = selfSigned(certDir, 'dave');
  const eve = selfSigned(certDir, 'eve');
  const issued = await daemon.request('POST', '/1.0/certificates', { type: 'client', name: 'dave-laptop', token: true, restricted: true, projects: ['p1'] });
  t.is(issued.status, 202, issued.body);
  const op = issued.json.metadata;
  t.is(op.class, 'token');
  t.like(op.metadata.request, { name: 'dave-laptop', type: 'client', restricted: true, projects: ['p1'] });
  t.deepEqual(op.metadata.addresses, [`${target.host}:${target.port}`]);
  t.is(op.metadata.fingerprint, (await daemon.request('GET', '/1.0')).json.metadata.environment.certificate_fingerprint);
  // The token as `lxc config trust add` prints it.
  const token = Buffer.from(JSON.stringify({ client_name: 'dave-laptop', fingerprint: op.metadata.fingerprint, addresses: op.metadata.addresses, secret: op.metadata.secret, expires_at: '0001-01-01T00:00:00Z' })).toString('base64');

  t.is((await as(dave, 'POST', '/1.0/certificates', { password: Buffer.from('{"secret":"00"}').toString('base64') })).status, 403);
  const redeemed = await as(dave, 'POST', '/1.0/certificates', { password: token });
  t.is(redeemed.status, 200, redeemed.body);
  t.like((await daemon.request('GET', `/1.0/certificates/${dave.fingerprint}`)).json.metadata, { name: 'dave-laptop', restricted: true, projects: ['p1'] });
  t.is((await daemon.request('GET', `/1.0/operations/${op.id}`)).json.metadata.status, 'Cancelled');
  t.is((await as(eve, 'POST', '/1.0/certificates', { password: token })).status, 403, 'a token works once');
  t.is((await as(eve, 'POST', '/1.0/certificates', { trust_token: op.metadata.secret })).status, 403);

  // A revoked (cancelled) token is refused too.
  const second = (await daemon.request('POST', '/1.0/certificates', { type: 'client', name: 'eve', token: true })).json.metadata;
  t.is((await daemon.request('DELETE', `/1.0/operations/${second.id}`)).status, 200);
  t.is((await as(eve, 'POST', '/1.0/certificates', { trust_token: second.metadata.secret })).status, 403);
  t.is((await as(dave, 'POST', '/1.0/certificates?project=p1', { type: 'client', token: true })).status, 403, 'restricted clients issue no tokens');
});

test.serial('a metrics certificate is not trusted for anything but metrics routes', async (t) => {
  t.is((await daemon.request('POST', '/1.0/certificates', { type: 'metrics', name: 'prometheus', certificate: meter.base64 })).status, 200);
  t.is((await as(meter, 'GET', '/1.0')).json.metadata.auth, 'untrusted');
  for (const url of ['/1.0/certificates', '/1.0/operations', '/1.0/warnings']) t.is((await as(meter, 'GET', url)).status, 403, url);
});

test.serial('an expired certificate stops being trusted when its validity ends', async (t) => {
  const ca = new TestCa('short');
  const brief = ca.issue('brief', { end: new Date(Date.now() + 4000) });
  t.is((await daemon.request('POST', '/1.0/certificates', { type: 'client', certificate: brief.base64 })).status, 200);
  t.is((await as(brief, 'GET', '/1.0/certificates')).status, 200);
  await new Promise((r) => setTimeout(r, 5000));
  let refused = 0;
  for (const [method, url] of [['GET', '/1.0/certificates'], ['GET', '/1.0/operations'], ['DELETE', `/1.0/certificates/${brief.fingerprint}`]] as const) {
    const res = await as(brief, method, url).catch((err: Error) => ({ status: -1, body: err.message }));
    // Node's TLS stack answers an expired client certificate at the HTTP layer here (rejectUnauthorized is off): 403.
    t.is(res.status, 403, `${method} ${url}`);
    refused++;
  }
  t.is((await as(brief, 'GET', '/1.0')).json.metadata.auth, 'untrusted');
  t.is((await as(brief, 'POST', '/1.0/certificates', { type: 'client', password: PASSWORD })).status, 400, 'an expired certificate cannot be added again');
  t.log(`expired certificate: ${refused} attempts refused`);
});

test.serial('https_allowed_credentials: core.https_allowed_credentials and the other CORS keys add their headers', async (t) => {
  t.is((await daemon.request('PATCH', '/1.0', { config: { 'core.https_allowed_credentials': 'true', 'core.https_allowed_methods': 'GET, POST', 'core.https_allowed_headers': 'Content-Type' } })).status, 200);
  for (const res of [await as(alice, 'GET', '/1.0'), await as(mallory, 'GET', '/1.0/certificates'), await daemon.request('GET', '/')]) {
    t.is(res.headers['access-control-allow-credentials'], 'true');
    t.is(res.headers['access-control-allow-origin'], 'https://ui.example');
    t.is(res.headers['access-control-allow-methods'], 'GET, POST');
    t.is(res.headers['access-control-allow-headers'], 'Content-Type');
  }
  t.is((await daemon.request('PATCH', '/1.0', { config: { 'core.https_allowed_credentials': 'maybe' } })).status, 400);
  t.is((await daemon.request('PATCH', '/1.0', { config: { 'core.https_allowed_credentials': '', 'core.https_allowed_origin': '', 'core.https_allowed_methods': '', 'core.https_allowed_headers': '' } })).status, 200);
  t.is((await as(alice, 'GET', '/1.0')).headers['access-control-allow-credentials'], undefined);
});

/** One HTTPS request over a raw TCP connection that first sends `preamble` (a PROXY header). */
function requestThroughProxy(preamble: Buffer, client: ClientCert, method: string, url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const raw = connect(target.port, target.host, () => {
      raw.write(preamble);
      const secure = tls.connect({ socket: raw, rejectUnauthorized: false, cert: client.cert, key: client.key }, () => {
        secure.write(`${method} ${url} HTTP/1.1\r\nHost: corral\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      });
      let text = '';
      secure.on('data', (c: Buffer) => (text += c));
      secure.on('end', () => resolve(text));
      secure.on('error', reject);
    });
    raw.on('error', reject);
  });
}

function proxyV2(ip: string, port: number): Buffer {
  const header = Buffer.alloc(16 + 12);
  Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]).copy(header);
  header[12] = 0x21; // v2, PROXY
  header[13] = 0x11; // TCP over IPv4
  header.writeUInt16BE(12, 14);
  Buffer.from(ip.split('.').map(Number)).copy(header, 16);
  Buffer.from([10, 0, 0, 1]).copy(header, 20);
  header.writeUInt16BE(port, 24);
  header.writeUInt16BE(8443, 26);
  return header;
}

test.serial('server_trusted_proxy: a PROXY header from a trusted source rewrites the requestor address', async (t) => {
  const ws = await daemon.websocket('/1.0/events?type=lifecycle');
  const events = collect(ws);
  const victims = [selfSigned(certDir, 'via-v1'), selfSigned(certDir, 'via-v2')];
  for (const v of victims) t.is((await daemon.request('POST', '/1.0/certificates', { type: 'client', certificate: v.base64 })).status, 200);

  // Not trusted yet: the header is just bytes in front of a TLS handshake, and the connection fails.
  const untrustedProxy = await requestThroughProxy(Buffer.from('PROXY TCP4 203.0.113.7 10.0.0.1 40000 8443\r\n'), alice, 'GET', '/1.0').catch(() => '');
  t.notRegex(untrustedProxy, /HTTP\/1\.1/);

  t.is((await daemon.request('PATCH', '/1.0', { config: { 'core.https_trusted_proxy': '127.0.0.1' } })).status, 200);
  t.is((await daemon.request('PATCH', '/1.0', { config: { 'core.https_trusted_proxy': 'not-an-ip' } })).status, 400);
  const v1 = await requestThroughProxy(Buffer.from('PROXY TCP4 203.0.113.7 10.0.0.1 40000 8443\r\n'), alice, 'DELETE', `/1.0/certificates/${victims[0]!.fingerprint}`);
  t.regex(v1, /^HTTP\/1\.1 200/);
  const v2 = await requestThroughProxy(proxyV2('198.51.100.9', 51000), alice, 'DELETE', `/1.0/certificates/${victims[1]!.fingerprint}`);
  t.regex(v2, /^HTTP\/1\.1 200/);
  await waitFor(() => events.filter((e) => e.metadata.action === 'certificate-deleted').length >= 2, 5000, 'the deletions');
  const deleted = events.filter((e) => e.metadata.action === 'certificate-deleted');
  t.deepEqual(deleted.map((e) => e.metadata.requestor), [
    { username: alice.fingerprint, protocol: 'tls', address: '203.0.113.7:40000' },
    { username: alice.fingerprint, protocol: 'tls', address: '198.51.100.9:51000' },
  ]);
  // A trusted source that sends garbage instead of a header is cut off; plain clients from elsewhere are unaffected.
  const garbage = await requestThroughProxy(Buffer.from('HELLO\r\n'), alice, 'GET', '/1.0').catch(() => '');
  t.notRegex(garbage, /HTTP\/1\.1/);
  t.is((await daemon.request('PATCH', '/1.0', { config: { 'core.https_trusted_proxy': '' } })).status, 200);
  t.is((await as(alice, 'GET', '/1.0')).json.metadata.auth, 'trusted');
  ws.close();
});
