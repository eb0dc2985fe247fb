/**
 * corral as a simplestreams image server: its public images of `default` are listed at
 * /streams/v1/index.json over HTTPS to anyone, and the real 5.0.2 `lxc` client adds it with
 * `--protocol simplestreams`, lists it, copies a unified and a split image into the reference
 * daemon (a private Debian lxd 5.0.2, see helpers/reference-daemon.ts) with the same fingerprints,
 * and launches a container there from it. Private images never appear nor download.
 */
import test from 'ava';
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startDaemon, startWithPool, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { collectRun, lxcOk, type ClientRun } from '../helpers/clients.js';
import { buildBusyboxImage, buildSquashfsRootfs, type BusyboxImage } from '../helpers/busybox-image.js';
import { freePort } from '../helpers/tls-client.js';
import { referenceUnavailable, startReference, type ReferenceDaemon } from '../helpers/reference-daemon.js';

const missing = referenceUnavailable();
const interop = missing ? test.skip : test.serial;
if (missing) console.warn(`Skipping the reference side of the simplestreams tests: ${missing}`);

const HOST = '127.0.17.23';
let d: Daemon;
let ref: ReferenceDaemon | undefined;
let unified: BusyboxImage;
let other: BusyboxImage;
let url = '';
let home = '';
const fp: { unified: string; split: string; secret: string } = { unified: '', split: '', secret: '' };
// Both daemons drive liblxc on this host: names must not collide with anything else running.
const suffix = randomBytes(3).toString('hex');

/** A plain HTTPS GET with no client certificate (the server's own is taken as it is). */
function fetch(pathname: string): Promise<{ status: number; body: Buffer; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = https.request(`${url}${pathname}`, { rejectUnauthorized: false, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** `lxc` with its own home, the reference's socket as `local:`. */
function homeLxc(...args: string[]): Promise<ClientRun> {
  return lxcIn(home, ...args);
}

function lxcIn(dir: string, ...args: string[]): Promise<ClientRun> {
  const { LXD_DIR: _d, ...env } = process.env;
  const child = spawn('lxc', args, { env: { ...env, LXD_CONF: dir, HOME: dir, ...(ref ? { LXD_SOCKET: ref.socket } : {}) } });
  child.stdin.end();
  return collectRun(child, 240_000);
}

async function ok(t: any, ...args: string[]): Promise<string> {
  const res = await homeLxc(...args);
  t.is(res.status, 0, `lxc ${args.join(' ')}: ${res.stderr}`);
  return res.stdout;
}

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');
const fingerprintOf = async (alias: string) => (await d.request('GET', `/1.0/images/aliases/${alias}`)).json.metadata.target as string;

test.before(async () => {
  unified = buildBusyboxImage('gzip');
  other = buildBusyboxImage('xz');
  d = await startWithPool({ plugins: 'full' });
  const port = await freePort();
  url = `https://${HOST}:${port}`;
  await lxcOk({ is: (a: unknown, b: unknown, m?: string) => { if (a !== b) throw new Error(m); } }, d.socket, 'config', 'set', 'core.https_address', `${HOST}:${port}`);
  // Aliases that are no hex: `bb` also named, as a fingerprint prefix, every image whose fingerprint began with it (one run in 256).
  for (const [args, key] of [
    [[unified.unified, '--alias', 'bbox', '--public'], 'unified'],
    [[unified.metadata, unified.rootfs, '--alias', 'bbsplit', '--alias', 'bbsplit-too', '--public'], 'split'],
    [[other.unified, '--alias', 'secret'], 'secret'],
  ] as const) {
    const res = spawnSync('lxc', ['image', 'import', ...args], { env: { ...process.env, LXD_SOCKET: d.socket, LXD_CONF: mkdtempSync(path.join(tmpdir(), 'corral-ss-conf-')) }, encoding: 'utf8' });
    if (res.status !== 0) throw new Error(`lxc image import ${args.join(' ')}: ${res.stderr}`);
    fp[key] = await fingerprintOf(args[args.indexOf('--alias') + 1]!);
  }
  home = mkdtempSync(path.join(tmpdir(), 'corral-ss-home-'));
  if (!missing) ref = await startReference();
});

test.after.always(async () => {
  await ref?.stop();
  await stopDaemons();
  for (const dir of [unified?.dir, other?.dir, home]) if (dir) rmSync(dir, { recursive: true, force: true });
});

test.serial('the index and products list the public images of default only, to a client without a certificate', async (t) => {
  const index = await fetch('/streams/v1/index.json');
  t.is(index.status, 200, index.body.toString());
  t.regex(String(index.headers['content-type']), /^application\/json/);
  const stream = JSON.parse(index.body.toString());
  t.is(stream.format, 'index:1.0');
  const entry = stream.index.images;
  t.is(entry.datatype, 'image-downloads');
  t.is(entry.path, 'streams/v1/images.json');
  t.deepEqual([...entry.products].sort(), [fp.unified, fp.split].sort());

  const products = await fetch(`/${entry.path}`);
  t.is(products.status, 200);
  const doc = JSON.parse(products.body.toString());
  t.is(doc.format, 'products:1.0');
  t.deepEqual(Object.keys(doc.products).sort(), [fp.unified, fp.split].sort());
  t.false(products.body.toString().includes(fp.secret), 'a private image is not listed');

  const one = doc.products[fp.unified];
  t.is(one.aliases, 'bbox');
  t.is(one.arch, 'x86_64');
  const [version] = Object.keys(one.versions);
  t.regex(version!, /^\d{8}_\d{2}:\d{2}$/);
  const combined = one.versions[version!].items['lxd_combined.tar.gz'];
  t.is(combined.ftype, 'lxd_combined.tar.gz');
  t.is(combined.sha256, fp.unified);
  const file = await fetch(`/${combined.path}`);
  t.is(file.status, 200);
  t.is(file.body.length, combined.size);
  t.is(sha256(file.body), fp.unified, 'the unified tarball is served as stored');

  const split = doc.products[fp.split];
  t.deepEqual(split.aliases.split(',').sort(), ['bbsplit', 'bbsplit-too']);
  const items = Object.values(split.versions)[0] as any;
  const meta = items.items['lxd.tar.xz'];
  const root = items.items['root.tar.xz'];
  t.is(meta.combined_sha256, fp.split);
  t.is(meta.combined_rootxz_sha256, fp.split);
  const [metaFile, rootFile] = await Promise.all([fetch(`/${meta.path}`), fetch(`/${root.path}`)]);
  t.is(sha256(metaFile.body), meta.sha256);
  t.is(sha256(rootFile.body), root.sha256);
  t.is(rootFile.body.length, root.size);
  t.is(sha256(Buffer.concat([metaFile.body, rootFile.body])), fp.split, 'metadata then rootfs hash to the fingerprint');
  t.deepEqual(metaFile.body, readFileSync(unified.metadata));
});

test.serial('files of private, unknown or misnamed images answer 404 in the error envelope', async (t) => {
  const asked = [
    `/images/${fp.secret}/lxd_combined.tar.xz`,
    `/images/${fp.secret}/lxd_combined.tar.gz`,
    `/images/${'0'.repeat(64)}/lxd_combined.tar.gz`,
    `/images/${fp.unified.slice(0, 12)}/lxd_combined.tar.gz`,
    `/images/${fp.unified}/root.tar.gz`,
    `/images/${fp.unified}/..%2F..%2Fserver.key`,
    `/images/${fp.split}/lxd_combined.tar.gz`,
  ];
  for (const pathname of asked) {
    const res = await fetch(pathname);
    t.is(res.status, 404, pathname);
    const body = JSON.parse(res.body.toString());
    t.is(body.type, 'error');
    t.is(body.error_code, 404);
  }
});

test.serial('an image made private leaves the index at once and its file answers 404; made public again it comes back', async (t) => {
  const listed = async () => JSON.parse((await fetch('/streams/v1/index.json')).body.toString()).index.images.products as string[];
  t.is((await d.request('PATCH', `/1.0/images/${fp.unified}`, { public: false })).status, 200);
  t.deepEqual(await listed(), [fp.split]);
  t.is((await fetch(`/images/${fp.unified}/lxd_combined.tar.gz`)).status, 404);
  t.is((await d.request('PATCH', `/1.0/images/${fp.unified}`, { public: true })).status, 200);
  t.deepEqual((await listed()).sort(), [fp.unified, fp.split].sort());
});

test.serial('a squashfs rootfs is listed as root.squashfs, and images of other projects are not served', async (t) => {
  const squashfs = buildSquashfsRootfs(unified.dir);
  const imported = spawnSync('lxc', ['image', 'import', unified.metadata, squashfs, '--alias', 'bbsq', '--public'], { env: { ...process.env, LXD_SOCKET: d.socket, LXD_CONF: home }, encoding: 'utf8' });
  t.is(imported.status, 0, imported.stderr);
  const squashFp = await fingerprintOf('bbsq');
  const doc = JSON.parse((await fetch('/streams/v1/images.json')).body.toString());
  const items = (Object.values(doc.products[squashFp].versions)[0] as any).items;
  t.is(items['root.squashfs'].ftype, 'squashfs');
  t.is(items['lxd.tar.xz'].combined_squashfs_sha256, squashFp);
  const root = await fetch(`/${items['root.squashfs'].path}`);
  t.is(sha256(root.body), items['root.squashfs'].sha256);
  t.deepEqual(root.body, readFileSync(squashfs));
  t.is((await d.request('DELETE', `/1.0/images/${squashFp}`)).status, 202);

  // A public image held only by a project with its own images: not served, its file not found.
  t.is((await d.request('POST', '/1.0/projects', { name: 'h17ss-other', config: { 'features.images': 'true' } })).status, 200);
  const third = buildBusyboxImage('bzip2');
  try {
    const up = spawnSync('lxc', ['image', 'import', third.unified, '--public', '--project', 'h17ss-other'], { env: { ...process.env, LXD_SOCKET: d.socket, LXD_CONF: home }, encoding: 'utf8' });
    t.is(up.status, 0, up.stderr);
    const listed = (await d.request('GET', '/1.0/images?project=h17ss-other')).json.metadata as string[];
    t.is(listed.length, 1);
    const otherFp = listed[0]!.split('/').pop()!.split('?')[0]!;
    const index = (await fetch('/streams/v1/index.json')).body.toString();
    t.false(index.includes(otherFp));
    t.is((await fetch(`/images/${otherFp}/lxd_combined.tar.bz2`)).status, 404);
    await d.request('DELETE', `/1.0/images/${otherFp}?project=h17ss-other`);
  } finally {
    rmSync(third.dir, { recursive: true, force: true });
  }
});

interop('lxc remote add --protocol simplestreams, then lxc image list shows the public images with their aliases', async (t) => {
  // The 5.0.2 client keeps no certificate for a simplestreams remote: it trusts the one in servercerts/<remote>.crt.
  mkdirSync(path.join(home, 'servercerts'), { recursive: true });
  copyFileSync(path.join(d.dir, 'server.crt'), path.join(home, 'servercerts', 'c.crt'));
  await ok(t, 'remote', 'add', 'c', url, '--protocol', 'simplestreams');
  const rows = (await ok(t, 'image', 'list', 'c:', '--format', 'csv', '-c', 'lfp')).trim().split('\n').sort();
  t.is(rows.length, 2, rows.join('\n'));
  const byFp = Object.fromEntries(rows.map((row) => [row.split(',')[1], row]));
  t.truthy(byFp[fp.unified.slice(0, 12)], rows.join('\n'));
  t.truthy(byFp[fp.split.slice(0, 12)], rows.join('\n'));
  t.regex(byFp[fp.unified.slice(0, 12)]!, /\bbbox\b/);
  t.regex(byFp[fp.split.slice(0, 12)]!, /bbsplit/);
  t.false(rows.join('\n').includes(fp.secret.slice(0, 12)));
  const info = await ok(t, 'image', 'info', 'c:bbsplit');
  t.regex(info, new RegExp(`Fingerprint: ${fp.split}`));
});

interop('lxc image copy c:bbox local: puts the unified image into the reference with the same fingerprint', async (t) => {
  await ok(t, 'image', 'copy', 'c:bbox', 'local:', '--alias', `h17ss-bb-${suffix}`);
  const image = (await ref!.request('GET', `/1.0/images/${fp.unified}`)).json;
  t.is(image.status_code, 200, JSON.stringify(image));
  t.is(image.metadata.fingerprint, fp.unified);
  t.is(image.metadata.size, readFileSync(unified.unified).length);
  t.is(image.metadata.update_source?.protocol, 'simplestreams');
  t.is(image.metadata.update_source?.server, url);
});

interop('lxc launch c:bbsplit on the reference: the split image arrives whole and its container runs', async (t) => {
  const name = `h17ss-c-${suffix}`;
  await ok(t, 'launch', 'c:bbsplit', name);
  const image = (await ref!.request('GET', `/1.0/images/${fp.split}`)).json;
  t.is(image.metadata?.fingerprint, fp.split, JSON.stringify(image));
  const state = (await ref!.request('GET', `/1.0/instances/${name}/state`)).json.metadata;
  t.is(state.status, 'Running');
  t.is((await ok(t, 'exec', name, '--', 'cat', '/etc/hostname')).trim(), name);
  await ok(t, 'delete', '--force', name);
});

// Push and relay (images_push_relay): the client holds both daemons as HTTPS remotes.
const PASSWORD = 'h17ss-pass-4e1f';
const REF_HOST = '127.0.17.24';
const SECOND_HOST = '127.0.17.25';

interop('lxc image copy c2:<fingerprint> r: --mode push: corral uploads to the reference with the secret the reference handed out (images_push_relay)', async (t) => {
  await lxcOk(t, d.socket, 'config', 'set', 'core.trust_password', PASSWORD);
  const refPort = await freePort();
  const set = await ref!.request('PATCH', '/1.0', { config: { 'core.https_address': `${REF_HOST}:${refPort}`, 'core.trust_password': PASSWORD } });
  t.is(set.status, 200, set.body);
  await ok(t, 'remote', 'add', 'c2', url, '--password', PASSWORD, '--accept-certificate');
  await ok(t, 'remote', 'add', 'r', `https://${REF_HOST}:${refPort}`, '--password', PASSWORD, '--accept-certificate');
  await ref!.request('DELETE', `/1.0/images/${fp.unified}`);
  await waitGone(fp.unified);

  // The 5.0.2 client posts the export to /1.0/images/<name as typed>/export: an alias is not found there,
  // by the reference as by corral, so push mode is given the fingerprint.
  const byAlias = await homeLxc('image', 'copy', 'c2:bbox', 'r:', '--mode', 'push');
  t.not(byAlias.status, 0);
  t.regex(byAlias.stderr, /not found/i);
  const refByAlias = await ref!.request('POST', `/1.0/images/h17ss-bb-${suffix}/export`, { target: 'https://127.0.0.1:1', secret: 'x' });
  t.is(refByAlias.status, 404, `the reference does not resolve aliases there either: ${refByAlias.body}`);

  const pushed = await homeLxc('image', 'copy', `c2:${fp.unified}`, 'r:', '--mode', 'push', '--alias', `h17ss-pushed-${suffix}`);
  t.is(pushed.status, 0, `${pushed.stderr}\n${d.output().slice(-3000)}`);
  const image = (await ref!.request('GET', `/1.0/images/${fp.unified}`)).json;
  t.is(image.status_code, 200, JSON.stringify(image));
  t.deepEqual(image.metadata.aliases.map((a: any) => a.name), [`h17ss-pushed-${suffix}`]);
  t.is(image.metadata.size, readFileSync(unified.unified).length);
  // The push leaves the lifecycle event the reference sends, naming the target.
  const ops = (await d.request('GET', '/1.0/operations?recursion=1')).json.metadata;
  t.falsy(Object.values(ops ?? {}).flat().find((op: any) => op.description === 'Downloading image' && op.status === 'Running'));
});

interop('lxc image copy c2:<fingerprint> r: --mode push sends both files of a split image; --mode relay carries it through the client', async (t) => {
  // The launch above left the image cached on the reference.
  await ref!.request('DELETE', `/1.0/images/${fp.split}`);
  await waitGone(fp.split);
  await ok(t, 'image', 'copy', `c2:${fp.split}`, 'r:', '--mode', 'push');
  t.is((await ref!.request('GET', `/1.0/images/${fp.split}`)).json.metadata?.fingerprint, fp.split);
  t.is((await ref!.request('DELETE', `/1.0/images/${fp.split}`)).status, 202);
  await waitGone(fp.split);
  await ok(t, 'image', 'copy', `c2:${fp.split}`, 'r:', '--mode', 'relay', '--alias', `h17ss-relayed-${suffix}`);
  const image = (await ref!.request('GET', `/1.0/images/${fp.split}`)).json.metadata;
  t.is(image?.fingerprint, fp.split);
  t.deepEqual(image.aliases.map((a: any) => a.name), [`h17ss-relayed-${suffix}`]);
});

interop('a push with a wrong secret, certificate or target fails with a clear error and leaves nothing behind', async (t) => {
  const refAddress = (await ref!.request('GET', '/1.0')).json.metadata.config['core.https_address'];
  const target = `https://${refAddress}`;
  const refCert = (await ref!.request('GET', '/1.0')).json.metadata.environment.certificate;
  const bad = async (body: unknown) => d.request('POST', `/1.0/images/${fp.secret}/export`, body);
  for (const [body, pattern] of [
    [{ target: 'ftp://x', secret: 's' }, /https/],
    [{ target: 'not a url', secret: 's' }, /not a URL/],
    [{ target, certificate: 'garbage', secret: 's' }, /certificate/],
    [{ secret: 's' }, /target/],
  ] as const) {
    const res = await bad(body);
    t.is(res.status, 400, res.body);
    t.regex(res.json.error, pattern);
  }
  t.is((await d.request('POST', `/1.0/images/${'0'.repeat(64)}/export`, { target, certificate: refCert, secret: 'x' })).status, 404);
  // Accepted, then the target refuses the secret: the operation fails saying so.
  const wrongSecret = await d.request('POST', `/1.0/images/${fp.secret}/export`, { target, certificate: refCert, secret: 'not-a-secret' });
  t.is(wrongSecret.status, 202);
  const op = (await d.request('GET', `${wrongSecret.json.operation}/wait?timeout=60`)).json.metadata;
  t.is(op.status, 'Failure');
  // The reference refuses before reading the upload; its answer is what the error carries.
  t.regex(op.err, /The target refused the image: not authorized/i);
  // A certificate other than the target's: refused before anything is sent.
  const other = readFileSync(path.join(d.dir, 'server.crt'), 'utf8');
  const wrongCert = await d.request('POST', `/1.0/images/${fp.secret}/export`, { target, certificate: other, secret: 'x' });
  const op2 = (await d.request('GET', `${wrongCert.json.operation}/wait?timeout=60`)).json.metadata;
  t.is(op2.status, 'Failure');
  t.regex(op2.err, /certificate/);
  t.is((await ref!.request('GET', `/1.0/images/${fp.secret}`)).status, 404, 'nothing arrived');
});

interop('the reference pulls from corral over the LXD protocol: a public image as is, a private one with a secret from POST /1.0/images/<fp>/secret (images_push_relay)', async (t) => {
  await ref!.request('DELETE', `/1.0/images/${fp.unified}`);
  await waitGone(fp.unified);
  const first = await homeLxc('image', 'copy', 'c2:bbox', 'local:', '--alias', `h17ss-pulled-${suffix}`);
  t.is(first.status, 0, `${first.stderr}\n${ref!.log().split('\n').filter((l) => /images|image/i.test(l)).slice(-30).join('\n')}`);
  const pulled = (await ref!.request('GET', `/1.0/images/${fp.unified}`)).json.metadata;
  t.is(pulled?.fingerprint, fp.unified);
  t.is(pulled.update_source?.protocol, 'lxd');

  await ok(t, 'image', 'copy', 'c2:secret', 'local:');
  t.is((await ref!.request('GET', `/1.0/images/${fp.secret}`)).json.metadata?.fingerprint, fp.secret);
  // The secret was spent by the download: no token is left running on corral.
  const running = (await d.request('GET', '/1.0/operations?recursion=1')).json.metadata.running ?? [];
  t.deepEqual(running.filter((op: any) => op.description === 'Image download token'), []);
  await ref!.request('DELETE', `/1.0/images/${fp.secret}`);
});

test.serial('an untrusted client sees a private image only with a download secret, and downloads it once', async (t) => {
  t.is((await fetch(`/1.0/images/${fp.secret}`)).status, 404);
  t.is((await fetch(`/1.0/images/${fp.secret}/export`)).status, 404);
  t.is((await fetch(`/1.0/images/${fp.unified}`)).status, 200, 'a public image is shown to anyone');
  const token = await d.request('POST', `/1.0/images/${fp.secret}/secret`);
  t.is(token.status, 202, token.body);
  const secret = token.json.metadata.metadata.secret as string;
  t.is((await fetch(`/1.0/images/${fp.secret}?secret=wrong`)).status, 404);
  t.is((await fetch(`/1.0/images/${fp.unified.slice(0, 12)}x/export?secret=${secret}`)).status, 404);
  const shown = await fetch(`/1.0/images/${fp.secret}?secret=${secret}`);
  t.is(shown.status, 200);
  t.is(JSON.parse(shown.body.toString()).metadata.fingerprint, fp.secret);
  const file = await fetch(`/1.0/images/${fp.secret}/export?secret=${secret}`);
  t.is(file.status, 200);
  t.is(sha256(file.body), fp.secret);
  t.is((await fetch(`/1.0/images/${fp.secret}/export?secret=${secret}`)).status, 404, 'the secret is spent');
  t.is((await d.request('GET', `${token.json.operation}`)).json.metadata.status, 'Success');
  t.is((await d.request('POST', `/1.0/images/${'0'.repeat(64)}/secret`)).status, 404);
  // The list: public images only (`lxc remote add --public`).
  const listed = JSON.parse((await fetch('/1.0/images')).body.toString()).metadata as string[];
  t.deepEqual(listed.map((u) => u.split('/').pop()).sort(), [fp.unified, fp.split].sort());
  // Aliases: an untrusted caller resolves one naming a public image; a private one answers as a missing one.
  t.is(JSON.parse((await fetch('/1.0/images/aliases/bbox')).body.toString()).metadata?.target, fp.unified);
  const privateAlias = await fetch('/1.0/images/aliases/secret');
  const missingAlias = await fetch('/1.0/images/aliases/no-such-alias');
  t.is(privateAlias.status, 404);
  t.deepEqual(JSON.parse(privateAlias.body.toString()), JSON.parse(missingAlias.body.toString()));
});

interop('lxc remote add --public: an untrusted client lists the public images and the reference launches from them', async (t) => {
  // A home whose client certificate corral does not trust.
  const stranger = mkdtempSync(path.join(tmpdir(), 'corral-ss-stranger-'));
  try {
    const run = async (...args: string[]) => {
      const res = await lxcIn(stranger, ...args);
      t.is(res.status, 0, `lxc ${args.join(' ')}: ${res.stderr}`);
      return res.stdout;
    };
    await run('remote', 'add', 'pub', url, '--public', '--accept-certificate');
    const out = await run('image', 'list', 'pub:', '--format', 'csv', '-c', 'fl');
    const rows = out.trim().split('\n').map((r) => r.split(',')[0]).sort();
    t.deepEqual(rows, [fp.unified.slice(0, 12), fp.split.slice(0, 12)].sort(), out);
    const name = `h17ss-pub-${suffix}`;
    await run('launch', 'pub:bbox', name);
    t.is((await ref!.request('GET', `/1.0/instances/${name}/state`)).json.metadata.status, 'Running');
    await run('delete', '--force', name);
  } finally {
    rmSync(stranger, { recursive: true, force: true });
  }
});

test.serial('corral to corral: lxc image copy --mode push and --mode relay between two corrals (images_push_relay)', async (t) => {
  await lxcOk(t, d.socket, 'config', 'set', 'core.trust_password', PASSWORD);
  const d2 = await startDaemon({ plugins: 'full' });
  const port2 = await freePort();
  await lxcOk(t, d2.socket, 'config', 'set', 'core.https_address', `${SECOND_HOST}:${port2}`);
  await lxcOk(t, d2.socket, 'config', 'set', 'core.trust_password', PASSWORD);
  const url2 = `https://${SECOND_HOST}:${port2}`;
  // Added already when the reference tests ran.
  if (!(await homeLxc('remote', 'list', '--format', 'csv')).stdout.includes('c2,')) {
    await ok(t, 'remote', 'add', 'c2', url, '--password', PASSWORD, '--accept-certificate');
  }
  await ok(t, 'remote', 'add', 'c3', url2, '--password', PASSWORD, '--accept-certificate');

  await ok(t, 'image', 'copy', `c2:${fp.unified}`, 'c3:', '--mode', 'push', '--alias', 'pushed');
  const pushed = (await d2.request('GET', `/1.0/images/${fp.unified}`)).json.metadata;
  t.is(pushed?.fingerprint, fp.unified);
  t.deepEqual(pushed.aliases.map((a: any) => a.name), ['pushed']);
  await ok(t, 'image', 'copy', `c2:${fp.split}`, 'c3:', '--mode', 'push');
  t.is((await d2.request('GET', `/1.0/images/${fp.split}`)).json.metadata?.fingerprint, fp.split);
  await ok(t, 'image', 'copy', `c2:${fp.secret}`, 'c3:', '--mode', 'relay', '--alias', 'relayed');
  t.is((await d2.request('GET', '/1.0/images/aliases/relayed')).json.metadata?.target, fp.secret);
  t.is((await d2.request('GET', '/1.0/operations?recursion=1')).json.metadata.running, undefined, 'no token or task left running');
});

test.serial('without a pending push secret an untrusted client can neither upload an image nor wait on an operation', async (t) => {
  const post = (headers: Record<string, string>, body: Buffer | string) => new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = https.request(`${url}/1.0/images`, { method: 'POST', rejectUnauthorized: false, agent: false, headers }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
  const tarball = readFileSync(other.unified);
  const refused: Record<string, string>[] = [{}, { 'X-LXD-secret': 'not-pending' }];
  for (const headers of refused) {
    const res = await post({ 'Content-Type': 'application/octet-stream', ...headers }, tarball);
    t.is(res.status, 403, res.body);
    t.is(JSON.parse(res.body).error_code, 403);
  }
  const json = await post({ 'Content-Type': 'application/json' }, JSON.stringify({ source: { type: 'image', mode: 'push', fingerprint: fp.secret } }));
  t.is(json.status, 403, 'an untrusted client cannot ask for a push token');
  // A running operation of this daemon: a token made over the socket.
  const token = await d.request('POST', '/1.0/images', { source: { type: 'image', mode: 'push', fingerprint: 'a'.repeat(64) } });
  const id = token.json.metadata.id;
  for (const query of ['', '?secret=', '?secret=wrong', `?secret=${token.json.metadata.metadata.secret}x`]) {
    t.is((await fetch(`/1.0/operations/${id}/wait${query}`)).status, 403, query);
  }
  t.is((await fetch(`/1.0/operations/${'0'.repeat(8)}-0000-0000-0000-000000000000/wait?secret=x`)).status, 403, 'nor learn which operations exist');
  await d.request('DELETE', `/1.0/operations/${id}`);
});

async function waitGone(fingerprint: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if ((await ref!.request('GET', `/1.0/images/${fingerprint}`)).status === 404) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`image ${fingerprint} still on the reference`);
}
