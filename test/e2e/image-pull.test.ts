/**
 * Images from other servers (LXD protocol, pull mode), through the real `lxc`: two corral daemons
 * on their own loopback addresses over HTTPS, a client home with both added as remotes; `lxc image
 * copy` of a private image (lxc asks the source for a secret and the target pulls as an untrusted
 * peer with it), `--copy-aliases`, `lxc launch a:bb b:c1`; bad sources through the API. Then the
 * reference daemon (a private one) both ways: corral pulls from it, it pulls from corral.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import type http from 'node:http';
import https from 'node:https';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { callAndWait } from '../helpers/api.js';
import { buildBusyboxImage } from '../helpers/busybox-image.js';
import { collectRun, hasLxc, lxc } from '../helpers/clients.js';
import { startWithPool, unixRequest, waitFor, type Daemon } from '../helpers/daemon.js';
import { RemoteClient, type Listening } from '../helpers/remotes.js';
import { startWithImage, stopImageDaemons, type ImageDaemon } from '../helpers/image-daemon.js';
import { referenceUnavailable, startReference, type ReferenceDaemon } from '../helpers/reference-daemon.js';
import { selfSigned } from '../helpers/pki.js';
import { freePort, tlsRequest } from '../helpers/tls-client.js';

const PASSWORD = 'pull-pass-0a4e';
const client = new RemoteClient(PASSWORD);
const { lxc: remoteLxc, ok } = client;
const skip = !hasLxc() ? 'the lxc client is not installed' : undefined;
const noReference = skip ?? referenceUnavailable();

let source: ImageDaemon;
let target: Daemon;
let ref: ReferenceDaemon | undefined;
const urls: Record<string, string> = {};

/** HTTPS on its own loopback address, and the daemon added to the client home as remote `name`. */
async function expose(name: string, daemon: Listening, ip: string): Promise<void> {
  urls[name] = await client.add(name, daemon, ip);
}

/** The operation events `lxc monitor` sees on `remote` while `action` runs. */
async function watchOperations(remote: string, action: () => Promise<unknown>): Promise<any[]> {
  const monitor = spawn('lxc', ['monitor', remote, '--type', 'operation', '--format', 'json'], { env: client.env() });
  let out = '';
  monitor.stdout.on('data', (c: Buffer) => (out += c));
  try {
    await new Promise((resolve) => setTimeout(resolve, 500));
    await action();
    await new Promise((resolve) => setTimeout(resolve, 500));
  } finally {
    monitor.kill();
  }
  return out.split('\n').filter((l) => l.trim().startsWith('{')).map((l) => JSON.parse(l).metadata);
}

/** What lxc printed last, after the progress lines it redraws with carriage returns. */
const lastLine = (out: string) => out.split(/[\r\n]/).map((l) => l.trim()).filter(Boolean).pop();

/** The fingerprint an alias names on a remote. */
const aliasTarget = async (t: any, remote: string, alias: string): Promise<string> =>
  JSON.parse(await ok(t, 'query', `${remote}:/1.0/images/aliases/${alias}`)).target;

const certificateOf = (dir: string, file = 'server.crt') => readFileSync(path.join(dir, file), 'utf8');

test.before(async () => {
  if (skip) return;
  source = await startWithImage({ plugins: 'full' });
  target = await startWithPool({ plugins: 'full' });
  await expose('a', source, '127.0.0.171');
  await expose('b', target, '127.0.0.172');
});

test.after.always(async () => {
  await ref?.stop();
  await stopImageDaemons();
  client.remove();
});

const imageOf = async (d: { socket: string }, fp: string) => {
  return (await unixRequest(d.socket, 'GET', `/1.0/images/${fp}`)).json;
};

test.serial('lxc image copy of a private image between two corrals, with --copy-aliases', async (t) => {
  if (skip) return t.pass(skip);
  const fp = await aliasTarget(t, 'a', 'bb');
  t.regex(fp, /^[0-9a-f]{64}$/);
  t.false((await imageOf(source, fp)).metadata.public, 'the source image is private: the copy needs a secret');
  const events = await watchOperations('b:', () => ok(t, 'image', 'copy', 'a:bb', 'b:', '--copy-aliases'));
  // download_progress as the reference reports it while it downloads, and gone from the finished operation.
  const downloads = events.filter((e) => e.description === 'Downloading image');
  t.true(downloads.some((e) => /^\d{1,3}% \(\d+(\.\d\d)?[kMGT]?B\/s\)$/.test(e.metadata?.download_progress ?? '')), JSON.stringify(downloads));
  const finished = downloads.find((e) => e.status === 'Success');
  t.deepEqual(Object.keys(finished?.metadata ?? {}).sort(), ['fingerprint', 'size']);
  const copied = (await imageOf(target, fp)).metadata;
  t.is(copied.fingerprint, fp);
  t.deepEqual(copied.aliases.map((a: any) => a.name), ['bb']);
  t.is(copied.cached, false);
  // Fetched with a one-time secret: no update source, as the reference records none either.
  t.is(copied.update_source, undefined);
  t.is(copied.size, (await imageOf(source, fp)).metadata.size);
  // The secret was spent by the download: no token operation is left on the source.
  const ops = (await unixRequest(source.socket, 'GET', '/1.0/operations?recursion=1')).json.metadata;
  t.deepEqual((ops.running ?? []).filter((o: any) => o.class === 'token'), []);
  // A second copy of an image the target holds adds only the alias asked for.
  await ok(t, 'image', 'copy', 'a:bb', 'b:', '--alias', 'bb2');
  t.deepEqual((await imageOf(target, fp)).metadata.aliases.map((a: any) => a.name).sort(), ['bb', 'bb2']);
});

test.serial('an untrusted client sees neither a private image, its alias nor its export without the right secret; a secret opens it for one export', async (t) => {
  if (skip) return t.pass(skip);
  const url = new URL(urls.a!);
  const peer = { host: url.hostname, port: Number(url.port) };
  const fp = await aliasTarget(t, 'a', 'bb');
  for (const p of [`/1.0/images/${fp}`, `/1.0/images/${fp}/export`, '/1.0/images/aliases/bb', `/1.0/images/${fp}/export?secret=${'0'.repeat(64)}`]) {
    const res = await tlsRequest(peer, undefined, 'GET', p);
    t.is(res.status, 404, `${p}: ${res.body}`);
  }
  // With a secret from POST /1.0/images/<fp>/secret: the record as often as asked, the export once.
  const token = JSON.parse(await ok(t, 'query', '-X', 'POST', `a:/1.0/images/${fp}/secret`));
  t.is(token.class, 'token');
  t.is(token.description, 'Image download token');
  const secret = token.metadata.secret as string;
  t.regex(secret, /^[0-9a-f]{64}$/);
  for (let i = 0; i < 2; i++) t.is((await tlsRequest(peer, undefined, 'GET', `/1.0/images/${fp}?secret=${secret}`)).json?.metadata?.fingerprint, fp);
  t.is((await tlsRequest(peer, undefined, 'GET', `/1.0/images/${fp}/export?secret=${secret}`)).status, 200);
  t.is((await tlsRequest(peer, undefined, 'GET', `/1.0/images/${fp}/export?secret=${secret}`)).status, 404, 'the export spent the secret');
  t.not((await unixRequest(source.socket, 'GET', `/1.0/operations/${token.id}`)).json.metadata.status, 'Running');
});

test.serial('lxc launch a:bb b:c1 downloads the image as a cached one and starts the container', async (t) => {
  if (skip) return t.pass(skip);
  const fp = await aliasTarget(t, 'a', 'bb');
  await ok(t, 'image', 'delete', 'b:bb');
  const events = await watchOperations('b:', () => ok(t, 'launch', 'a:bb', 'b:c1'));
  // The download is part of the create operation, with its progress there, as with the reference.
  t.true(events.some((e) => e.description === 'Creating instance' && /^\d{1,3}% \(/.test(e.metadata?.download_progress ?? '')), JSON.stringify(events));
  t.is((await ok(t, 'list', 'b:', '--format', 'csv', '-c', 'ns')).trim(), 'c1,RUNNING');
  const cached = (await imageOf(target, fp)).metadata;
  t.is(cached.cached, true);
  t.is(cached.auto_update, true, 'images.auto_update_cached is true by default');
  t.deepEqual(cached.aliases, []);
  const config = JSON.parse(await ok(t, 'query', `b:/1.0/instances/c1`)).config;
  t.is(config['volatile.base_image'], fp);
  await ok(t, 'delete', '--force', 'b:c1');
});

test.serial('two launches from the same remote image at once: both start, one cached image; a malformed remote source is a 400', async (t) => {
  if (skip) return t.pass(skip);
  const fp = await aliasTarget(t, 'a', 'bb');
  await remoteLxc('image', 'delete', `b:${fp}`);
  await Promise.all(['c2', 'c3'].map((name) => ok(t, 'launch', 'a:bb', `b:${name}`)));
  t.is((await ok(t, 'list', 'b:', '--format', 'csv', '-c', 'ns')).trim(), 'c2,RUNNING\nc3,RUNNING');
  t.is((await target.request('GET', '/1.0/images')).json.metadata.length, 1);
  for (const name of ['c2', 'c3']) await ok(t, 'delete', '--force', `b:${name}`);
  const bad = await target.request('POST', '/1.0/instances', { name: 'c4', source: { type: 'image', mode: 'pull', server: 'http://127.0.0.171:1', alias: 'bb' } });
  t.is(bad.status, 400);
  t.regex(bad.json.error, /https:\/\//);
});

test.serial('a public split image: copied without a secret, corral → corral and corral → the reference', async (t) => {
  if (skip) return t.pass(skip);
  const imported = await lxc(source.socket, 'image', 'import', source.image.metadata, source.image.rootfs, '--alias', 'split', '--public');
  t.is(imported.status, 0, imported.stderr);
  const fp = await aliasTarget(t, 'a', 'split');
  const events = await watchOperations('a:', () => ok(t, 'image', 'copy', 'a:split', 'b:', '--copy-aliases', '--auto-update'));
  t.false(events.some((e) => e.class === 'token'), 'lxc asks no secret for a public image');
  const copied = (await imageOf(target, fp)).metadata;
  t.is(copied.fingerprint, fp);
  t.is(copied.auto_update, true);
  t.deepEqual(copied.aliases.map((a: any) => a.name), ['split']);
  // Split on the target too: its export is multipart again.
  const exported = await unixRequest(target.socket, 'GET', `/1.0/images/${fp}/export`);
  t.regex(String(exported.headers['content-type']), /^multipart\/form-data; boundary=/);
  if (noReference) return;
  const r = await reference(t);
  await ok(t, 'image', 'copy', 'a:split', 'ref:', '--alias', 'split-from-corral', '--auto-update');
  const onRef = (await r.request('GET', `/1.0/images/${fp}`)).json.metadata;
  t.is(onRef?.fingerprint, fp);
  // The update source the reference records for a public image copied by alias; corral records the same.
  const { certificate: refCert, ...refSource } = onRef.update_source;
  const { certificate: ourCert, ...ourSource } = copied.update_source;
  t.deepEqual(refSource, { alias: 'split', protocol: 'lxd', server: urls.a, image_type: '' });
  t.deepEqual(ourSource, refSource);
  t.is(ourCert, refCert);
});

test.serial('lxc image refresh fetches what the alias names now on the source, moves the aliases, drops the old image (image_force_refresh)', async (t) => {
  if (skip) return t.pass(skip);
  const first = await aliasTarget(t, 'a', 'split');
  await remoteLxc('image', 'delete', `b:${first}`);
  await ok(t, 'image', 'alias', 'create', 'a:rolling', first);
  await ok(t, 'image', 'copy', 'a:rolling', 'b:', '--copy-aliases', '--auto-update');
  if (!noReference) {
    const r = await reference(t);
    await r.lxc('image', 'delete', first);
    await ok(t, 'image', 'copy', 'a:rolling', 'ref:', '--copy-aliases', '--auto-update');
  }
  t.is(lastLine(await ok(t, 'image', 'refresh', 'b:rolling')), 'Image already up to date.');

  // A newer image takes the alias on the source.
  const newer = buildBusyboxImage('xz');
  try {
    const imported = await lxc(source.socket, 'image', 'import', newer.unified, '--public');
    t.is(imported.status, 0, imported.stderr);
    const second = createHash('sha256').update(readFileSync(newer.unified)).digest('hex');
    await ok(t, 'image', 'alias', 'delete', 'a:rolling');
    await ok(t, 'image', 'alias', 'create', 'a:rolling', second);

    const remotes = noReference ? ['b'] : ['b', 'ref'];
    for (const remote of remotes) {
      const refreshed = await ok(t, 'image', 'refresh', `${remote}:rolling`);
      // lxc draws download_progress while it waits, as for the reference.
      t.regex(refreshed, /Refreshing the image: \d+% \(/, remote);
      t.is(lastLine(refreshed), 'Image refreshed successfully!', remote);
      t.is(await aliasTarget(t, remote, 'rolling'), second, remote);
      const images = JSON.parse(await ok(t, 'query', `${remote}:/1.0/images?recursion=1`)) as any[];
      const fresh = images.find((i) => i.fingerprint === second);
      t.truthy(fresh, remote);
      t.is(fresh.auto_update, true, remote);
      t.is(fresh.update_source?.alias, 'rolling', remote);
      t.false(images.some((i) => i.fingerprint === first), `${remote}: the old image is gone`);
      t.is(lastLine(await ok(t, 'image', 'refresh', `${remote}:rolling`)), 'Image already up to date.', remote);
    }
  } finally {
    rmSync(newer.dir, { recursive: true, force: true });
  }
  // An image with nowhere to refresh from (uploaded here): a clear refusal.
  const uploaded = await lxc(source.socket, 'image', 'refresh', 'bb');
  t.not(uploaded.status, 0);
  t.regex(uploaded.stderr, /no source to refresh from/);
});

/**
 * A second alias of the private image whose name cannot be read as a fingerprint: an alias the
 * caller may not see falls back to a fingerprint prefix (as the reference resolves names), and
 * `bb` is also the prefix of about one public image in 256.
 */
const PRIVATE_ALIAS = 'private-box';
async function privateAlias(t: any): Promise<string> {
  const aliases = JSON.parse(await ok(t, 'query', 'a:/1.0/images/aliases')) as string[];
  if (!aliases.some((a) => a.endsWith(`/${PRIVATE_ALIAS}`))) await ok(t, 'image', 'alias', 'create', `a:${PRIVATE_ALIAS}`, await aliasTarget(t, 'a', 'bb'));
  return PRIVATE_ALIAS;
}

test.serial('a corral added as a public remote by a stranger (lxc remote add --public): its public images listed, launched from, never the private ones', async (t) => {
  if (skip) return t.pass(skip);
  // A client home nobody trusts: it reads the source as an untrusted client; it reaches the target with a password.
  const stranger = mkdtempSync(path.join(tmpdir(), 'corral-pull-stranger-'));
  const run = (...args: string[]) => {
    const { LXD_SOCKET: _s, LXD_DIR: _d, ...env } = process.env;
    const child = spawn('lxc', args, { env: { ...env, LXD_CONF: stranger, HOME: stranger } });
    child.stdin.end();
    return collectRun(child, 180_000);
  };
  const must = async (...args: string[]) => {
    const res = await run(...args);
    t.is(res.status, 0, `lxc ${args.join(' ')}: ${res.stderr}`);
    return res.stdout;
  };
  try {
    await must('remote', 'add', 'pub', urls.a!, '--public', '--accept-certificate');
    await must('remote', 'add', 'b', urls.b!, '--password', PASSWORD, '--accept-certificate');
    const listed = (await must('image', 'list', 'pub:', '--format', 'csv', '-c', 'lp')).trim().split('\n').sort();
    t.true(listed.some((line) => line.startsWith('split,')), listed.join(' | '));
    t.true(listed.every((line) => line.endsWith(',yes')), `only public images: ${listed.join(' | ')}`);
    await must('launch', 'pub:split', 'b:c9');
    t.is((await must('list', 'b:', '--format', 'csv', '-c', 'ns')).trim(), 'c9,RUNNING');
    await must('delete', '--force', 'b:c9');
    const refused = await run('launch', `pub:${await privateAlias(t)}`, 'b:c10');
    t.not(refused.status, 0, 'a private image is not reachable through a public remote');
  } finally {
    rmSync(stranger, { recursive: true, force: true });
  }
});

/** POST /1.0/images on the target with a remote source; the answer and the operation it started. */
const pull = async (src: Record<string, unknown>) => callAndWait(target, 'POST', '/1.0/images', { source: { type: 'image', mode: 'pull', protocol: 'lxd', ...src } });

test.serial('bad remote sources: a 400 for a malformed request, a failed operation naming the cause, nothing left behind', async (t) => {
  if (skip) return t.pass(skip);
  await privateAlias(t);
  const before = (await target.request('GET', '/1.0/images')).json.metadata;
  const refused = [
    [{ server: 'http://127.0.0.171:1', alias: 'bb' }, /https:\/\//],
    [{ server: 'not a url', alias: 'bb' }, /not a URL/],
    [{ server: urls.a, protocol: 'gopher', alias: 'bb' }, /protocol "gopher"/],
    [{ server: urls.a }, /"source.fingerprint" or "source.alias"/],
    [{ server: urls.a, alias: 'bb', certificate: 'garbage' }, /not a PEM certificate/],
    [{ server: urls.a, alias: 'bb', image_type: 'vm' }, /image type "vm"/],
  ] as const;
  for (const [src, message] of refused) {
    const res = await pull(src);
    t.is(res.status, 400, JSON.stringify(src));
    t.regex(res.json.error, message);
  }
  const failing = [
    // Nothing listens there.
    [{ server: 'https://127.0.0.173:9', alias: 'bb' }, /127\.0\.0\.173:9/],
    // The target's own certificate is not the source's.
    [{ server: urls.a, alias: 'bb', certificate: certificateOf(target.dir) }, /certificate of https:\/\/127\.0\.0\.171:\d+ is not the one given/],
    // No certificate given: the peer's self-signed one is not trusted by the system's authorities.
    [{ server: urls.a, alias: 'bb' }, /cannot be trusted/],
    // The source answers the trusted target (its certificate is not trusted there): not found.
    [{ server: urls.a, alias: 'nope', certificate: certificateOf(source.dir) }, /No image or alias "nope"/],
    [{ server: urls.a, alias: PRIVATE_ALIAS, certificate: certificateOf(source.dir), secret: 'f'.repeat(64) }, /No image or alias "private-box"/],
  ] as const;
  for (const [src, message] of failing) {
    const res = await pull(src);
    t.is(res.status, 202, JSON.stringify(src));
    t.is(res.op.status, 'Failure', JSON.stringify(src));
    t.regex(res.op.err, message);
    t.log(res.op.err);
  }
  t.deepEqual((await target.request('GET', '/1.0/images')).json.metadata, before);
  t.deepEqual(readdirSync(path.join(target.dir, 'images', '.staging')).length, 0, 'no staged download is left');
});

/** The private reference daemon, with the same image under `bb`, on HTTPS and added as remote `ref`. */
async function reference(t: any): Promise<ReferenceDaemon> {
  if (ref) return ref;
  ref = await startReference();
  const imported = await ref.lxc('image', 'import', source.image.unified, '--alias', 'bb');
  t.is(imported.status, 0, imported.stderr);
  await expose('ref', ref, '127.0.0.174');
  return ref;
}

test.serial('the reference → corral: lxc image copy of a private image from the reference', async (t) => {
  if (noReference) return t.pass(noReference);
  const r = await reference(t);
  const fp = await aliasTarget(t, 'ref', 'bb');
  t.false((await r.request('GET', `/1.0/images/${fp}`)).json.metadata.public);
  // The launch above left it cached on the target: copy it afresh.
  await remoteLxc('image', 'delete', `b:${fp}`);
  await ok(t, 'image', 'copy', 'ref:bb', 'b:', '--alias', 'from-ref');
  const copied = (await imageOf(target, fp)).metadata;
  t.is(copied.fingerprint, fp);
  t.deepEqual(copied.aliases.map((a: any) => a.name), ['from-ref']);
  t.is(copied.update_source, undefined, 'fetched with a secret: no update source');
  // The secret lxc asked the reference for is spent.
  const ops = (await r.request('GET', '/1.0/operations?recursion=1')).json.metadata;
  t.deepEqual((ops.running ?? []).filter((o: any) => o.class === 'token'), []);
});

test.serial('corral → the reference: the reference pulls a private image from corral', async (t) => {
  if (noReference) return t.pass(noReference);
  const r = await reference(t);
  const fp = await aliasTarget(t, 'a', 'bb');
  await r.lxc('image', 'delete', fp);
  await ok(t, 'image', 'copy', 'a:bb', 'ref:', '--alias', 'from-corral', '--auto-update');
  const copied = (await r.request('GET', `/1.0/images/${fp}`)).json.metadata;
  t.is(copied?.fingerprint, fp);
  t.deepEqual(copied.aliases.map((a: any) => a.name), ['from-corral']);
  t.is(copied.update_source, undefined, 'the reference keeps no update source for an image fetched with a secret');
  // And the reference launches from corral's image directly.
  await ok(t, 'launch', 'a:bb', 'ref:c-from-corral');
  t.regex(await ok(t, 'list', 'ref:', '--format', 'csv', '-c', 'ns'), /c-from-corral,RUNNING/);
  await ok(t, 'delete', '--force', 'ref:c-from-corral');
});

/**
 * A peer that lies: its record names one fingerprint and its export sends other bytes, or it stops
 * sending halfway. A tiny HTTPS server made here plays it (a real daemon will not lie).
 */
async function lyingPeer(): Promise<{ url: string; cert: string; closed: Promise<void>; close(): void }> {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-liar-'));
  const { cert, key } = selfSigned(dir, 'liar');
  const tarball = readFileSync(source.image.unified);
  const claimed = 'a'.repeat(64);
  const stalled = 'b'.repeat(64);
  const cut = 'c'.repeat(64);
  const oversized = 'd'.repeat(64);
  let sawClose!: () => void;
  const closed = new Promise<void>((resolve) => (sawClose = resolve));
  const sync = (res: http.ServerResponse, metadata: unknown) => res.end(JSON.stringify({ type: 'sync', status: 'Success', status_code: 200, metadata }));
  const server = https.createServer({ cert, key }, (req, res) => {
    const p = (req.url ?? '').split('?')[0];
    if (p === '/1.0/images/aliases/liar') return sync(res, { name: 'liar', target: claimed, type: 'container' });
    if (p === '/1.0/images/aliases/stall') return sync(res, { name: 'stall', target: stalled, type: 'container' });
    for (const fp of [claimed, stalled, cut]) {
      if (p === `/1.0/images/${fp}`) return sync(res, { fingerprint: fp, size: tarball.length, filename: 'x.tar.gz', properties: {}, type: 'container' });
    }
    // Claims a tiny image, then sends far more.
    if (p === `/1.0/images/${oversized}`) return sync(res, { fingerprint: oversized, size: 100, properties: {}, type: 'container' });
    if (p === `/1.0/images/${oversized}/export`) {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      return res.end(Buffer.concat([tarball, tarball]));
    }
    // Hangs up halfway.
    if (p === `/1.0/images/${cut}/export`) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': tarball.length });
      res.write(tarball.subarray(0, 4096));
      setTimeout(() => req.socket.destroy(), 100);
      return undefined;
    }
    if (p === `/1.0/images/${claimed}/export`) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': tarball.length });
      return res.end(tarball);
    }
    if (p === `/1.0/images/${stalled}/export`) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': tarball.length });
      res.write(tarball.subarray(0, 4096));
      req.socket.on('close', sawClose);
      return undefined;
    }
    res.statusCode = 404;
    res.end(JSON.stringify({ type: 'error', error: 'Not found', error_code: 404 }));
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.175', resolve));
  return {
    url: `https://127.0.0.175:${port}`, cert, closed,
    close: () => {
      server.closeAllConnections();
      server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

test.serial('a peer whose bytes do not match the fingerprint, that hangs up, sends too much, or a download cancelled halfway: nothing is left', async (t) => {
  if (skip) return t.pass(skip);
  const liar = await lyingPeer();
  try {
    const before = (await target.request('GET', '/1.0/images')).json.metadata;
    const lied = await pull({ server: liar.url, alias: 'liar', certificate: liar.cert });
    t.is(lied.op.status, 'Failure');
    t.regex(lied.op.err, /does not match its fingerprint/);
    const hungUp = await pull({ server: liar.url, fingerprint: 'c'.repeat(64), certificate: liar.cert });
    t.regex(hungUp.op.err, /broke off/);
    const tooLong = await pull({ server: liar.url, fingerprint: 'd'.repeat(64), certificate: liar.cert });
    t.regex(tooLong.op.err, /sent more than the 100 bytes/);

    const started = await target.request('POST', '/1.0/images', { source: { type: 'image', mode: 'pull', protocol: 'lxd', server: liar.url, alias: 'stall', certificate: liar.cert } });
    t.is(started.status, 202);
    const op = started.json.operation as string;
    await waitFor(async () => readdirSync(path.join(target.dir, 'images', '.staging')).length > 0, 15_000, 'the download to start');
    t.is((await target.request('DELETE', op)).status, 200);
    const ended = (await target.request('GET', `${op}/wait?timeout=30`)).json.metadata;
    t.not(ended.status, 'Success');
    await liar.closed;
    t.deepEqual((await target.request('GET', '/1.0/images')).json.metadata, before);
    t.is(readdirSync(path.join(target.dir, 'images', '.staging')).length, 0, 'no staged download is left');
  } finally {
    liar.close();
  }
});
