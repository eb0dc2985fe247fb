/**
 * The web UI's routes over HTTP: /ui redirects to /ui/, the page and its modules come with a strict
 * Content-Security-Policy, only the UI's own files are served, a trusted certificate gets the page over
 * HTTPS and an untrusted one the 403 envelope, GET / still lists only /1.0, and the edge build has no UI.
 * Pages of other sites cannot use the browser's certificate against the API (the Origin check).
 */
import test from 'ava';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { startDaemon, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { selfSigned, type ClientCert } from '../helpers/pki.js';
import { freePort, tlsRequest, type TlsTarget } from '../helpers/tls-client.js';

let full: Daemon;
let edge: Daemon;
let target: TlsTarget;
let browser: ClientCert;
let stranger: ClientCert;
let certDir: string;

test.before(async () => {
  [full, edge] = await Promise.all([startDaemon({ plugins: 'full' }), startDaemon({ plugins: 'edge' })]);
  certDir = mkdtempSync(path.join(tmpdir(), 'corral-web-ui-'));
  browser = selfSigned(certDir, 'ui-browser');
  stranger = selfSigned(certDir, 'ui-stranger');
  target = { host: '127.0.16.1', port: await freePort() };
  const set = await full.request('PATCH', '/1.0', { config: { 'core.https_address': `${target.host}:${target.port}` } });
  if (set.status !== 200) throw new Error(`setting core.https_address failed: ${set.body}`);
  const trust = await full.request('POST', '/1.0/certificates', { type: 'client', name: 'ui-browser', certificate: browser.base64 });
  if (trust.status !== 200) throw new Error(`trusting the browser certificate failed: ${trust.body}`);
  await waitFor(() => tlsRequest(target, browser, 'GET', '/1.0').then((r) => r.status === 200, () => false), 15000, 'the HTTPS listener');
});

test.after.always(async () => {
  await stopDaemons();
  rmSync(certDir, { recursive: true, force: true });
});

function policyOf(headers: Record<string, unknown>): Map<string, string[]> {
  const policy = new Map<string, string[]>();
  for (const directive of String(headers['content-security-policy'] ?? '').split(';')) {
    const [name, ...values] = directive.trim().split(/\s+/);
    if (name) policy.set(name, values);
  }
  return policy;
}

test('GET /ui redirects to /ui/, which serves the page with a strict Content-Security-Policy', async (t) => {
  const moved = await full.request('GET', '/ui');
  t.is(moved.status, 301);
  t.is(moved.headers.location, '/ui/');
  const page = await full.request('GET', '/ui/');
  t.is(page.status, 200);
  t.regex(String(page.headers['content-type']), /^text\/html/);
  t.regex(page.body, /<script type="module" src="\/ui\/app.js"><\/script>/);
  const policy = policyOf(page.headers);
  t.deepEqual(policy.get('default-src'), ["'none'"]);
  t.deepEqual(policy.get('connect-src'), ["'self'"]);
  t.deepEqual(policy.get('frame-ancestors'), ["'none'"]);
  t.false(policy.get('script-src')!.includes("'unsafe-inline'"));
  t.is(page.headers['x-content-type-options'], 'nosniff');
  // The one inline script, the import map, is allowed by its hash and by nothing wider.
  const importMap = /<script type="importmap">([\s\S]*?)<\/script>/.exec(page.body)![1]!;
  const hash = `'sha256-${createHash('sha256').update(importMap).digest('base64')}'`;
  t.deepEqual(policy.get('script-src'), ["'self'", hash]);
  t.deepEqual(Object.keys(JSON.parse(importMap).imports).sort(), ['htm', 'preact', 'preact/hooks']);
});

test('the page\'s script and the library\'s modules are served as JavaScript, as published', async (t) => {
  const page = await full.request('GET', '/ui/');
  const importMap = JSON.parse(/<script type="importmap">([\s\S]*?)<\/script>/.exec(page.body)![1]!);
  for (const url of ['/ui/app.js', '/ui/style.css', ...Object.values<string>(importMap.imports)]) {
    const res = await full.request('GET', url);
    t.is(res.status, 200, url);
    t.regex(String(res.headers['content-type']), url.endsWith('.css') ? /^text\/css/ : /^text\/javascript/, url);
    t.truthy(res.headers['content-security-policy'], url);
  }
  t.regex((await full.request('GET', '/ui/vendor/preact-hooks.mjs')).body, /from\s*"preact"/, 'hooks import preact by name: the import map resolves it');
});

test('only the UI\'s own files are served: other names, dot segments and other verbs get the error envelope', async (t) => {
  for (const url of ['/ui/nope.js', '/ui/../1.0', '/ui/%2e%2e/1.0', '/ui/vendor/../../package.json', '/ui/index.html/x']) {
    const res = await full.request('GET', url);
    t.is(res.status, 404, url);
    t.is(res.json?.type, 'error', url);
    t.is(res.json?.error_code, 404, url);
  }
  const post = await full.request('POST', '/ui/', {});
  t.is(post.status, 400);
  t.is(post.json?.type, 'error');
});

test('GET / still lists only /1.0, as the reference does', async (t) => {
  const root = await full.request('GET', '/');
  t.is(root.status, 200);
  t.deepEqual(root.json.metadata, ['/1.0']);
});

test('over HTTPS a trusted certificate gets the page; an untrusted one, or none, the 403 envelope and no page', async (t) => {
  const page = await tlsRequest(target, browser, 'GET', '/ui/');
  t.is(page.status, 200);
  t.regex(page.body, /<div id="app">/);
  const moved = await tlsRequest(target, browser, 'GET', '/ui');
  t.is(moved.status, 301);
  t.is(moved.headers.location, '/ui/');
  for (const client of [stranger, undefined]) {
    for (const url of ['/ui', '/ui/', '/ui/app.js', '/ui/vendor/preact.mjs']) {
      const refused = await tlsRequest(target, client, 'GET', url);
      t.is(refused.status, 403, `${client?.name ?? 'no certificate'} ${url}`);
      t.is(refused.json?.error_code, 403);
      t.notRegex(refused.body, /<html|import/);
    }
  }
  t.deepEqual((await tlsRequest(target, stranger, 'GET', '/')).json.metadata, ['/1.0'], 'GET / stays open to anyone');
});

test('a certificate restricted to another project gets the page, and the API refuses it the default project as usual', async (t) => {
  const restricted = selfSigned(certDir, 'ui-restricted');
  t.is((await full.request('POST', '/1.0/projects', { name: 'ui-elsewhere' })).status, 200);
  const trust = await full.request('POST', '/1.0/certificates', { type: 'client', name: 'ui-restricted', certificate: restricted.base64, restricted: true, projects: ['ui-elsewhere'] });
  t.is(trust.status, 200, trust.body);
  t.is((await tlsRequest(target, restricted, 'GET', '/ui/')).status, 200);
  t.is((await tlsRequest(target, restricted, 'GET', '/ui/app.js')).status, 200);
  t.is((await tlsRequest(target, restricted, 'GET', '/1.0/instances')).status, 403);
  t.is((await tlsRequest(target, restricted, 'GET', '/1.0/instances?project=ui-elsewhere')).status, 200);
});

test('the edge build has no UI: /ui and /ui/ are 404, as on the reference (5.0 ships none)', async (t) => {
  for (const url of ['/ui', '/ui/', '/ui/app.js']) {
    const res = await edge.request('GET', url);
    t.is(res.status, 404, url);
    t.is(res.json?.error_code, 404, url);
  }
  t.deepEqual((await edge.request('GET', '/')).json.metadata, ['/1.0']);
});

/** An upgrade to the events websocket over HTTPS with an Origin header: the status it gets. */
function eventsUpgrade(client: ClientCert, origin: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`wss://${target.host}:${target.port}/1.0/events`, { rejectUnauthorized: false, cert: client.cert, key: client.key, origin });
    ws.once('open', () => {
      ws.close();
      resolve(101);
    });
    ws.once('unexpected-response', (_req, res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    ws.once('error', reject);
  });
}

test.serial('a browser request from another site is refused over HTTPS, unless core.https_allowed_origin names it', async (t) => {
  const own = `https://${target.host}:${target.port}`;
  const evil = 'https://evil.example';
  const start = { action: 'start' };
  const refused = await tlsRequest(target, browser, 'PUT', '/1.0/instances/none/state', start, { origin: evil, 'content-type': 'text/plain' });
  t.is(refused.status, 403);
  t.regex(refused.json.error, /another site/);
  t.is((await tlsRequest(target, browser, 'GET', '/1.0/instances', undefined, { origin: evil })).status, 403);
  t.is((await tlsRequest(target, browser, 'GET', '/ui/', undefined, { origin: 'null' })).status, 403);
  t.is(await eventsUpgrade(browser, evil), 403, 'no events for another site\'s page');
  // The page's own origin, and websocket clients that name this host and port with http, ws or wss
  // (Python's websocket-client, ws4py under pylxd), go on.
  for (const origin of [own, `http://${target.host}:${target.port}`, `wss://${target.host}:${target.port}`, `ws://${target.host}:${target.port}`]) {
    t.is((await tlsRequest(target, browser, 'GET', '/1.0/instances', undefined, { origin })).status, 200, origin);
    t.is(await eventsUpgrade(browser, origin), 101, origin);
  }
  t.is((await tlsRequest(target, browser, 'GET', '/1.0/instances', undefined, { origin: `https://${target.host}:${target.port + 1}` })).status, 403, 'another port is another site');
  t.is((await tlsRequest(target, browser, 'GET', '/1.0/instances')).status, 200, 'the API clients send no Origin');
  t.is((await full.request('GET', '/1.0/instances', undefined, { origin: evil })).status, 200, 'the unix socket serves no web page');
  // The one origin the operator allows.
  t.is((await full.request('PATCH', '/1.0', { config: { 'core.https_allowed_origin': evil } })).status, 200);
  try {
    const allowed = await tlsRequest(target, browser, 'GET', '/1.0/instances', undefined, { origin: evil });
    t.is(allowed.status, 200);
    t.is(allowed.headers['access-control-allow-origin'], evil);
    t.is(await eventsUpgrade(browser, evil), 101);
    t.is((await tlsRequest(target, browser, 'GET', '/1.0/instances', undefined, { origin: 'https://other.example' })).status, 403);
  } finally {
    await full.request('PATCH', '/1.0', { config: { 'core.https_allowed_origin': '' } });
  }
});
