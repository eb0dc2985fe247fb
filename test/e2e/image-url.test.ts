/**
 * `source.type: url` (`lxc image import https://…`): the daemon asks the URL with HEAD, reads the
 * image's sha256 and file location from the `LXD-Image-Hash` and `LXD-Image-URL` headers, and
 * downloads the file. A tiny web server made here on loopback plays the URL's server, over HTTPS
 * (its certificate given to corral through NODE_EXTRA_CA_CERTS, as an operator would add an
 * authority) and plain HTTP (which the reference, with only the system's authorities, is asked over).
 */
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { callAndWait } from '../helpers/api.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { hasLxc, lxc } from '../helpers/clients.js';
import { startWithPool, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { referenceUnavailable, startReference, type ReferenceDaemon } from '../helpers/reference-daemon.js';
import { freePort } from '../helpers/tls-client.js';

const skip = !hasLxc() ? 'the lxc client is not installed' : undefined;
const noReference = skip ?? referenceUnavailable();
const HOST = '127.0.44.3';

let d: Daemon;
let ref: ReferenceDaemon | undefined;
let image: BusyboxImage;
let fp = '';
let dir = '';
const servers: (http.Server | https.Server)[] = [];
const base: { http: string; https: string } = { http: '', https: '' };
/** What the web server was asked: method, path and the headers that matter. */
const asked: { method: string; url: string; headers: http.IncomingHttpHeaders }[] = [];

const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

/** The URL's server: `/meta*` answers HEAD with the headers, `/file*` serves the tarball. */
function handler(self: () => string) {
  return (req: http.IncomingMessage, res: http.ServerResponse) => {
    asked.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    const tarball = readFileSync(image.unified);
    const route = (req.url ?? '').split('?')[0];
    const named = (hash: string, where: string) => {
      res.writeHead(200, { 'LXD-Image-Hash': hash, 'LXD-Image-URL': where });
      res.end();
    };
    if (route === '/meta') return named(fp, `${self()}/file.tar.gz`);
    if (route === '/meta-relative') return named(fp, '/file.tar.gz');
    if (route === '/meta-wrong') return named('e'.repeat(64), `${self()}/file.tar.gz`);
    if (route === '/meta-bad-hash') return named('not-a-hash', `${self()}/file.tar.gz`);
    if (route === '/meta-no-url') {
      res.writeHead(200, { 'LXD-Image-Hash': fp });
      return res.end();
    }
    if (route === '/meta-gone') return named(fp, `${self()}/missing`);
    if (route === '/moved') {
      res.writeHead(302, { location: '/meta' });
      return res.end();
    }
    if (route === '/loop') {
      res.writeHead(301, { location: '/loop' });
      return res.end();
    }
    if (route === '/plain') {
      res.writeHead(200, { 'content-type': 'text/html' });
      return res.end('<html></html>');
    }
    if (route === '/file.tar.gz') {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': tarball.length });
      return res.end(req.method === 'HEAD' ? undefined : tarball);
    }
    res.writeHead(404);
    res.end();
  };
}

async function listen(server: http.Server | https.Server): Promise<number> {
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, HOST, resolve));
  servers.push(server);
  return port;
}

test.before(async () => {
  if (skip) return;
  dir = mkdtempSync(path.join(tmpdir(), 'corral-url-'));
  image = buildBusyboxImage('gzip');
  fp = sha256(image.unified);
  // A certificate for the web server's address, which corral is told to trust.
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', 'web.key', '-out', 'web.crt',
    '-days', '2', '-subj', '/CN=corral-url-test', '-addext', `subjectAltName=IP:${HOST}`], { cwd: dir, stdio: 'ignore' });
  const secure = https.createServer({ cert: readFileSync(path.join(dir, 'web.crt')), key: readFileSync(path.join(dir, 'web.key')) }, handler(() => base.https));
  base.https = `https://${HOST}:${await listen(secure)}`;
  base.http = `http://${HOST}:${await listen(http.createServer(handler(() => base.http)))}`;
  d = await startWithPool({ plugins: 'full', env: { NODE_EXTRA_CA_CERTS: path.join(dir, 'web.crt') } });
});

test.after.always(async () => {
  await ref?.stop();
  await stopDaemons();
  for (const server of servers) {
    server.closeAllConnections();
    server.close();
  }
  for (const made of [image]) if (made) rmSync(made.dir, { recursive: true, force: true });
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test.serial('lxc image import https://…: the daemon asks the URL with HEAD, downloads the file LXD-Image-URL names and checks it against LXD-Image-Hash', async (t) => {
  if (skip) return t.pass(skip);
  asked.length = 0;
  const imported = await lxc(d.socket, 'image', 'import', `${base.https}/meta`, '--alias', 'fromurl', '--public');
  t.is(imported.status, 0, imported.stderr);
  const record = (await d.request('GET', `/1.0/images/${fp}`)).json.metadata;
  t.is(record.fingerprint, fp);
  t.deepEqual(record.aliases.map((a: any) => a.name), ['fromurl']);
  t.is(record.public, true);
  t.is(record.cached, false);
  t.is(record.update_source, undefined, 'a URL is no source to update from, as with the reference');
  t.is(record.filename, '', 'the reference names a URL\'s image nothing unless asked');
  // HEAD of the URL first (with the server's architecture), then GET of the file.
  t.deepEqual(asked.map((a) => `${a.method} ${a.url}`), ['HEAD /meta', 'GET /file.tar.gz']);
  t.truthy(asked[0]!.headers['lxd-server-architectures']);
  // Again, through a redirect: the image is there already; only the alias asked for is added.
  asked.length = 0;
  const again = await callAndWait(d, 'POST', '/1.0/images', { source: { type: 'url', url: `${base.https}/moved` }, aliases: [{ name: 'fromurl2' }] });
  t.deepEqual(asked.map((a) => `${a.method} ${a.url}`), ['HEAD /moved', 'HEAD /meta']);
  t.is(again.op?.status, 'Success', again.op?.err);
  t.deepEqual((await d.request('GET', `/1.0/images/${fp}`)).json.metadata.aliases.map((a: any) => a.name).sort(), ['fromurl', 'fromurl2']);
  t.is((await callAndWait(d, 'DELETE', `/1.0/images/${fp}`)).op?.status, 'Success');
});

/** The fields of a URL-fetched image's record that do not depend on when or where it arrived. */
const comparable = (record: any) => {
  const { uploaded_at: _u, last_used_at: _l, created_at: _c, ...rest } = record;
  return rest;
};

test.serial('POST /1.0/images with a url source and aliases, public, auto_update, properties and filename: the same record as the reference makes', async (t) => {
  if (noReference) return t.pass(noReference);
  const body = {
    source: { type: 'url', url: `${base.http}/meta` },
    aliases: [{ name: 'himg2-url', description: 'from a URL' }], public: true, auto_update: true, properties: { extra: 'yes' }, filename: 'given.tar.gz',
  };
  ref = await startReference();
  const theirs = await ref.call('POST', '/1.0/images', body);
  t.is(theirs.op?.status, 'Success', theirs.op?.err);
  const ours = await callAndWait(d, 'POST', '/1.0/images', body);
  t.is(ours.status, 202);
  t.is(ours.op?.status, 'Success', ours.op?.err);
  t.deepEqual(Object.keys(ours.op.metadata).sort(), Object.keys(theirs.op.metadata).sort());
  const refRecord = (await ref.request('GET', `/1.0/images/${fp}`)).json.metadata;
  const ourRecord = (await d.request('GET', `/1.0/images/${fp}`)).json.metadata;
  t.deepEqual(comparable(ourRecord), comparable(refRecord));
  t.is(refRecord.filename, 'given.tar.gz');
  t.is(refRecord.properties.extra, 'yes');
  t.is(refRecord.update_source, undefined);
  await ref.request('DELETE', `/1.0/images/${fp}`);
  t.is((await callAndWait(d, 'DELETE', `/1.0/images/${fp}`)).op?.status, 'Success');
});

test.serial('bad url sources: a 400 for a malformed request, a failed operation naming what the URL\'s server got wrong, nothing left behind', async (t) => {
  if (skip) return t.pass(skip);
  const before = (await d.request('GET', '/1.0/images')).json.metadata;
  // The reference accepts these and fails in the operation; corral refuses them at once (decision 0044).
  for (const [source, message] of [
    [{ type: 'url' }, /needs "source.url"/],
    [{ type: 'url', url: 'ftp://127.0.44.3/x' }, /http:\/\/ or https:\/\//],
    [{ type: 'url', url: 'not a url' }, /not a URL/],
  ] as const) {
    const res = await d.request('POST', '/1.0/images', { source });
    t.is(res.status, 400, JSON.stringify(source));
    t.regex(res.json.error, message);
  }
  for (const [route, message] of [
    ['/plain', /without an LXD-Image-Hash header/],
    ['/meta-no-url', /without an LXD-Image-URL header/],
    ['/meta-bad-hash', /not a sha256 fingerprint/],
    ['/meta-wrong', /does not match its fingerprint/],
    ['/meta-gone', /HTTP 404/],
    ['/nothing-here', /HTTP 404/],
    ['/loop', /redirected more than 10 times/],
  ] as const) {
    const res = await callAndWait(d, 'POST', '/1.0/images', { source: { type: 'url', url: `${base.https}${route}` } });
    t.is(res.status, 202, route);
    t.is(res.op?.status, 'Failure', route);
    t.regex(res.op?.err ?? '', message, route);
  }
  // Nothing listens there.
  const refused = await callAndWait(d, 'POST', '/1.0/images', { source: { type: 'url', url: 'https://127.0.44.4:9/meta' } });
  t.regex(refused.op?.err ?? '', /Cannot reach/);
  t.deepEqual((await d.request('GET', '/1.0/images')).json.metadata, before);
  t.is(readdirSync(path.join(d.dir, 'images', '.staging')).length, 0, 'no staged download is left');
});
