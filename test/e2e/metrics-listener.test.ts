/**
 * `core.metrics_address`: a second HTTPS listener, as the reference has, with the server's
 * certificate and the same client authentication, serving `/`, `/1.0` and `/1.0/metrics` only (404
 * elsewhere, websockets included), moved and stopped live; and `candid.api.url` putting `candid`
 * in GET /1.0's `auth_methods` (trusted and untrusted views, either listener), as the reference does.
 */
import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startDaemon, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { lxc, lxcOk } from '../helpers/clients.js';
import { selfSigned, type ClientCert } from '../helpers/pki.js';
import { freePort, tlsRequest, tlsWebsocket, type TlsTarget } from '../helpers/tls-client.js';

let d: Daemon;
const scratch = mkdtempSync(path.join(tmpdir(), 'corral-metrics-listener-'));
let main: TlsTarget;
let metrics: TlsTarget;
let admin: ClientCert;
let scraper: ClientCert;
let stranger: ClientCert;

test.before(async () => {
  d = await startDaemon({ plugins: 'full' });
  main = { host: '127.0.0.1', port: await freePort() };
  metrics = { host: '127.0.0.1', port: await freePort() };
  admin = selfSigned(scratch, 'admin');
  scraper = selfSigned(scratch, 'scraper');
  stranger = selfSigned(scratch, 'stranger');
  await lxc(d.socket, 'config', 'trust', 'add', admin.certFile, '--name', 'admin');
  await lxc(d.socket, 'config', 'trust', 'add', scraper.certFile, '--name', 'scraper', '--type', 'metrics');
});

test.after.always(async () => {
  await stopDaemons();
  rmSync(scratch, { recursive: true, force: true });
});

test.serial('lxc config set core.metrics_address opens a listener for metrics only', async (t) => {
  await lxcOk(t, d.socket, 'config', 'set', 'core.metrics_address', `127.0.0.1:${metrics.port}`);
  t.is((await lxcOk(t, d.socket, 'config', 'get', 'core.metrics_address')).trim(), `127.0.0.1:${metrics.port}`);
  // Metrics certificates and trusted clients scrape there; others are refused.
  for (const who of [scraper, admin]) {
    const res = await tlsRequest(metrics, who, 'GET', '/1.0/metrics');
    t.is(res.status, 200, `${who.name}: ${res.body}`);
    t.regex(res.body, /# EOF\s*$/);
    t.regex(String(res.headers['content-type']), /^text\/plain/);
  }
  t.is((await tlsRequest(metrics, stranger, 'GET', '/1.0/metrics')).status, 403);
  t.is((await tlsRequest(metrics, undefined, 'GET', '/1.0/metrics')).status, 403);
  // The server's root is there too, as on the reference; nothing else is.
  t.deepEqual((await tlsRequest(metrics, stranger, 'GET', '/')).json.metadata, ['/1.0']);
  t.is((await tlsRequest(metrics, admin, 'GET', '/1.0')).json.metadata.auth, 'trusted');
  t.is((await tlsRequest(metrics, scraper, 'GET', '/1.0')).json.metadata.auth, 'untrusted');
  for (const p of ['/1.0/instances', '/1.0/certificates', '/1.0/nope', '/1.0/operations']) {
    const res = await tlsRequest(metrics, admin, 'GET', p);
    t.is(res.status, 404, p);
    t.is(res.json.error_code, 404);
  }
  t.is((await tlsWebsocket(metrics, admin, '/1.0/events')).status, 404);
  // Without core.https_address there is no other listener: the API is not reachable over the network.
  await t.throwsAsync(tlsRequest(main, admin, 'GET', '/1.0'));
});

test.serial('the metrics listener moves and stops live; a bad or busy address is refused and the old one kept', async (t) => {
  await lxcOk(t, d.socket, 'config', 'set', 'core.https_address', `127.0.0.1:${main.port}`);
  const busy = await lxc(d.socket, 'config', 'set', 'core.metrics_address', `127.0.0.1:${main.port}`);
  t.not(busy.status, 0);
  t.regex(busy.stderr, /already in use/);
  t.is((await tlsRequest(metrics, scraper, 'GET', '/1.0/metrics')).status, 200, 'the old listener still serves');
  const bad = await lxc(d.socket, 'config', 'set', 'core.metrics_address', '999.1.1.1:1');
  t.not(bad.status, 0);
  t.regex(bad.stderr, /Invalid listen address/);
  // The main listener keeps serving metrics to metrics certificates.
  t.is((await tlsRequest(main, scraper, 'GET', '/1.0/metrics')).status, 200);

  const moved = { host: '127.0.0.1', port: await freePort() };
  await lxcOk(t, d.socket, 'config', 'set', 'core.metrics_address', `127.0.0.1:${moved.port}`);
  t.is((await tlsRequest(moved, scraper, 'GET', '/1.0/metrics')).status, 200);
  await t.throwsAsync(tlsRequest(metrics, scraper, 'GET', '/1.0/metrics'));
  await lxcOk(t, d.socket, 'config', 'unset', 'core.metrics_address');
  await t.throwsAsync(tlsRequest(moved, scraper, 'GET', '/1.0/metrics'));
  t.is((await tlsRequest(main, admin, 'GET', '/1.0/instances')).status, 200, 'the main listener is untouched');
});

test.serial('candid.api.url adds candid to auth_methods, for every caller; unsetting it takes it away', async (t) => {
  const methods = async () => [
    (await d.request('GET', '/1.0')).json.metadata.auth_methods,
    (await tlsRequest(main, stranger, 'GET', '/1.0')).json.metadata.auth_methods,
    (await tlsRequest(main, admin, 'GET', '/1.0')).json.metadata.auth_methods,
  ];
  t.deepEqual(await methods(), [['tls'], ['tls'], ['tls']]);
  await lxcOk(t, d.socket, 'config', 'set', 'candid.api.url', 'https://127.0.0.1:9/');
  t.deepEqual(await methods(), [['tls', 'candid'], ['tls', 'candid'], ['tls', 'candid']]);
  await lxcOk(t, d.socket, 'config', 'unset', 'candid.api.url');
  t.deepEqual(await methods(), [['tls'], ['tls'], ['tls']]);
});
