/**
 * The images plugin on a real daemon (`--plugins images`), driven by the real lxc client and by
 * direct API calls for the error cases; ImagesService.unpack through an in-process test kernel.
 */
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { gunzipSync } from 'node:zlib';
import { ImagesServiceRef } from '../../sdk/index.js';
import { TarWalker } from '../../sdk/lib/archive/index.js';
import { startTestKernel } from '../../sdk/testing/index.js';
import { buildBusyboxImage, buildSquashfsRootfs, type BusyboxImage } from '../helpers/busybox-image.js';
import { lxc, python } from '../helpers/clients.js';
import { collect, startDaemon, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { buildUnified, goodMetadata, multipartBody, sha256 } from './images_fixtures.js';

const EXTENSIONS = ['image_compression_algorithm', 'image_create_aliases', 'image_types', 'images_expiry', 'compression_squashfs'];

let d: Daemon;
let gz: BusyboxImage;
let scratch: string;
let bbFingerprint: string;
let lifecycle: any[] = [];

const OCTET = { 'content-type': 'application/octet-stream' };

async function waitOp(daemon: Daemon, url: string): Promise<any> {
  return (await daemon.request('GET', `${url}/wait?timeout=60`)).json.metadata;
}

async function upload(daemon: Daemon, body: Buffer, headers: Record<string, string> = OCTET) {
  const res = await daemon.request('POST', '/1.0/images', body, headers);
  const op = res.json?.type === 'async' ? await waitOp(daemon, res.json.operation) : undefined;
  return { status: res.status, json: res.json, op };
}

const imageFiles = (daemon: Daemon) => readdirSync(path.join(daemon.dir, 'images')).filter((n) => n !== '.staging').sort();
const staged = (daemon: Daemon) => readdirSync(path.join(daemon.dir, 'images', '.staging'));

async function listImages(daemon: Daemon): Promise<any[]> {
  const r = await lxc(daemon.socket, 'image', 'list', '--format', 'json');
  if (r.status !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout);
}

const events = (action: string) => lifecycle.filter((e) => e.metadata.action === action);

test.before(async () => {
  gz = buildBusyboxImage('gzip');
  scratch = mkdtempSync(path.join(tmpdir(), 'corral-images-test-'));
  d = await startDaemon({ plugins: 'images' });
  lifecycle = collect(await d.websocket('/1.0/events?type=lifecycle'));
});

test.after.always(async () => {
  await stopDaemons();
  rmSync(gz.dir, { recursive: true, force: true });
  rmSync(scratch, { recursive: true, force: true });
});

test.serial('lxc image import of a unified tarball: the record as the reference shows it (image_types)', async (t) => {
  const started = performance.now();
  const r = await lxc(d.socket, 'image', 'import', gz.unified, '--alias', 'bb');
  const ms = performance.now() - started;
  t.is(r.status, 0, r.stderr);
  bbFingerprint = sha256(gz.unified);
  t.true(r.stdout.includes(bbFingerprint), r.stdout);
  t.log(`lxc image import (busybox, gzip, whole client run): ${ms.toFixed(0)} ms`);

  const [image] = (await listImages(d)).filter((i) => i.fingerprint === bbFingerprint);
  t.truthy(image);
  t.is(image.type, 'container');
  t.is(image.architecture, 'x86_64');
  t.is(image.filename, path.basename(gz.unified));
  t.is(image.size, statSync(gz.unified).size);
  t.is(image.public, false);
  t.is(image.cached, false);
  t.is(image.auto_update, false);
  t.deepEqual(image.profiles, ['default']);
  t.deepEqual(image.aliases, [{ name: 'bb', description: '' }]);
  t.is(image.properties.os, 'Busybox');
  t.is(image.properties.description, 'Busybox x86_64');
  t.is(image.expires_at, '1970-01-01T00:00:00Z');
  t.is(image.last_used_at, '0001-01-01T00:00:00Z');
  t.regex(image.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  t.true(Date.parse(image.uploaded_at) >= Date.parse(image.created_at));
  // Field order of the reference.
  t.deepEqual(Object.keys(image), ['auto_update', 'properties', 'public', 'expires_at', 'profiles', 'aliases', 'architecture', 'cached', 'filename', 'fingerprint', 'size', 'type', 'created_at', 'last_used_at', 'uploaded_at']);
  t.deepEqual(imageFiles(d), [bbFingerprint]);

  const info = await lxc(d.socket, 'image', 'info', 'bb');
  t.is(info.status, 0, info.stderr);
  t.regex(info.stdout, new RegExp(`Fingerprint: ${bbFingerprint}`));
  t.regex(info.stdout, /Type: container/);
  t.regex(info.stdout, /os: Busybox/);

  const created = events('image-created').find((e) => e.metadata.source === `/1.0/images/${bbFingerprint}`);
  t.truthy(created);
  t.deepEqual(created.metadata.context, { type: 'container' });
  t.is(created.metadata.requestor.protocol, 'unix');
  t.is(created.project, 'default');
  // `--alias` is a POST /1.0/images/aliases after the import.
  t.truthy(events('image-alias-created').find((e) => e.metadata.source === '/1.0/images/aliases/bb' && e.metadata.context.target === bbFingerprint));
});

test.serial('the api_extensions of the plugin are advertised', async (t) => {
  const info = (await d.request('GET', '/1.0')).json.metadata;
  for (const name of EXTENSIONS) t.true(info.api_extensions.includes(name), name);
});

test.serial('every compression imports, unified and split, with the reference fingerprints', async (t) => {
  for (const compression of ['xz', 'bzip2', 'zstd', 'none'] as const) {
    const img = buildBusyboxImage(compression);
    try {
      const unified = await lxc(d.socket, 'image', 'import', img.unified);
      t.is(unified.status, 0, `${compression}: ${unified.stderr}`);
      const split = await lxc(d.socket, 'image', 'import', img.metadata, img.rootfs);
      t.is(split.status, 0, `${compression} split: ${split.stderr}`);
      const uf = sha256(img.unified);
      const sf = sha256(img.metadata, img.rootfs);
      const listed = await listImages(d);
      const u = listed.find((i) => i.fingerprint === uf);
      const s = listed.find((i) => i.fingerprint === sf);
      t.truthy(u, `${compression} unified listed`);
      t.truthy(s, `${compression} split listed`);
      t.is(s.size, statSync(img.metadata).size + statSync(img.rootfs).size);
      t.is(s.filename, path.basename(img.rootfs));
      t.is(s.type, 'container');
      t.true(imageFiles(d).includes(`${sf}.rootfs`));
      for (const fp of [uf, sf]) {
        const del = await lxc(d.socket, 'image', 'delete', fp);
        t.is(del.status, 0, del.stderr);
        t.false(imageFiles(d).some((f) => f.startsWith(fp)), `${compression}: files of ${fp} removed`);
      }
    } finally {
      rmSync(img.dir, { recursive: true, force: true });
    }
  }
});

test.serial('split import with a squashfs rootfs (compression_squashfs); exports give back the same files', async (t) => {
  const squashfs = buildSquashfsRootfs(gz.dir);
  const r = await lxc(d.socket, 'image', 'import', gz.metadata, squashfs, '--alias', 'sq');
  t.is(r.status, 0, r.stderr);
  const fp = sha256(gz.metadata, squashfs);
  const image = (await d.request('GET', '/1.0/images/aliases/sq')).json.metadata;
  t.is(image.target, fp);
  const record = (await d.request('GET', `/1.0/images/${fp}`)).json.metadata;
  t.is(record.filename, 'rootfs.squashfs');
  t.is(record.size, statSync(gz.metadata).size + statSync(squashfs).size);
  t.true(imageFiles(d).includes(`${fp}.rootfs`));

  const out = path.join(scratch, 'export');
  mkdirSync(out, { recursive: true });
  const split = await lxc(d.socket, 'image', 'export', 'sq', path.join(out, 'sq'));
  t.is(split.status, 0, split.stderr);
  t.deepEqual(readFileSync(path.join(out, 'sq')), readFileSync(gz.metadata));
  t.deepEqual(readFileSync(path.join(out, 'sq.root')), readFileSync(squashfs));

  const unified = await lxc(d.socket, 'image', 'export', 'bb', path.join(out, 'bb'));
  t.is(unified.status, 0, unified.stderr);
  t.deepEqual(readFileSync(path.join(out, 'bb.tar.gz')), readFileSync(gz.unified));

  const whole = await d.request('GET', `/1.0/images/${bbFingerprint}/export`);
  t.is(whole.headers['content-type'], 'application/octet-stream');
  t.is(whole.headers['content-length'], String(statSync(gz.unified).size));
  t.is(whole.headers['content-disposition'], `inline;filename=${bbFingerprint}.tar.gz`);
  const head = await d.request('GET', `/1.0/images/${fp}/export`);
  t.regex(String(head.headers['content-type']), /^multipart\/form-data; boundary=/);
  t.regex(head.body, new RegExp(`name="rootfs"; filename="${fp}.squashfs"`));
  t.regex(head.body, new RegExp(`name="metadata"; filename="meta-${fp}.tar.gz"`));
  t.truthy(events('image-retrieved').find((e) => e.metadata.source === `/1.0/images/${fp}`));
  t.is((await lxc(d.socket, 'image', 'delete', 'sq')).status, 0);
});

test.serial('aliases: lxc create/rename/delete; 409 for duplicates, 404 for unknown targets, ETag, lifecycle events', async (t) => {
  const fp = bbFingerprint;
  t.is((await lxc(d.socket, 'image', 'alias', 'create', 'bb2', fp.slice(0, 12))).status, 0);
  t.is((await lxc(d.socket, 'image', 'alias', 'rename', 'bb2', 'bb3')).status, 0);
  const names = JSON.parse((await lxc(d.socket, 'image', 'alias', 'list', '--format', 'json')).stdout).map((a: any) => a.name);
  t.deepEqual(names.sort(), ['bb', 'bb3']);
  const listed = (await d.request('GET', '/1.0/images/aliases?recursion=1')).json.metadata.find((a: any) => a.name === 'bb3');
  t.deepEqual(listed, { description: '', target: fp, name: 'bb3', type: 'container' });
  t.deepEqual((await d.request('GET', '/1.0/images/aliases')).json.metadata, ['/1.0/images/aliases/bb', '/1.0/images/aliases/bb3']);

  const dup = await d.request('POST', '/1.0/images/aliases', { name: 'bb', target: fp });
  t.is(dup.status, 409);
  t.is(dup.json.error, 'Alias "bb" already exists');
  t.is((await d.request('POST', '/1.0/images/aliases', { name: 'x', target: 'ffff' })).status, 404);
  t.is((await d.request('POST', '/1.0/images/aliases', { name: 'x', target: 'not-hex' })).status, 404);
  t.is((await d.request('POST', '/1.0/images/aliases', { name: '', target: fp })).status, 400);
  t.is((await d.request('POST', '/1.0/images/aliases', { name: 'a b', target: fp })).status, 400);
  t.is((await d.request('POST', '/1.0/images/aliases', { name: 'x' })).status, 400);
  t.is((await d.request('POST', '/1.0/images/aliases/bb3', { name: 'bb' })).status, 409);
  t.is((await d.request('POST', '/1.0/images/aliases/nope', { name: 'other' })).status, 404);
  t.is((await d.request('GET', '/1.0/images/aliases/nope')).status, 404);
  t.is((await d.request('DELETE', '/1.0/images/aliases/nope')).status, 404);

  // Names may hold slashes, as image servers name them.
  t.is((await d.request('POST', '/1.0/images/aliases', { name: 'busybox/edge', target: fp })).status, 200);
  t.is((await d.request('GET', '/1.0/images/aliases/busybox%2Fedge')).json.metadata.name, 'busybox/edge');
  t.is((await d.request('DELETE', '/1.0/images/aliases/busybox%2Fedge')).status, 200);

  const got = await d.request('GET', '/1.0/images/aliases/bb3');
  const etag = String(got.headers.etag);
  t.is((await d.request('PATCH', '/1.0/images/aliases/bb3', { description: 'third' }, { 'if-match': '"stale"' })).status, 412);
  t.is((await d.request('PATCH', '/1.0/images/aliases/bb3', { description: 'third' }, { 'if-match': etag })).status, 200);
  t.is((await d.request('PUT', '/1.0/images/aliases/bb3', { description: 'no target' })).status, 400);
  t.is((await d.request('PUT', '/1.0/images/aliases/bb3', { description: 'gone', target: 'ffff' })).status, 404);
  const patched = (await d.request('GET', '/1.0/images/aliases/bb3')).json.metadata;
  t.is(patched.description, 'third');
  t.is(patched.target, fp);

  t.is((await lxc(d.socket, 'image', 'alias', 'delete', 'bb3')).status, 0);
  t.is((await d.request('GET', '/1.0/images/aliases/bb3')).status, 404);

  await waitFor(() => events('image-alias-deleted').length > 0, 5000, 'the alias-deleted event');
  const renamed = events('image-alias-renamed').find((e) => e.metadata.source === '/1.0/images/aliases/bb3');
  t.deepEqual(renamed?.metadata.context, { old_name: 'bb2' });
  const updated = events('image-alias-updated').find((e) => e.metadata.source === '/1.0/images/aliases/bb3');
  t.deepEqual(updated?.metadata.context, { target: fp });
  for (const e of [...events('image-alias-created'), renamed, updated, ...events('image-alias-deleted')]) {
    t.is(e.project, 'default');
    t.is(e.metadata.requestor.protocol, 'unix');
  }
});

test.serial('PUT and PATCH edit an image; expires_at is settable and shown (images_expiry); If-Match guards', async (t) => {
  const url = `/1.0/images/${bbFingerprint}`;
  const before = await d.request('GET', url);
  const original = before.json.metadata;
  const put = await d.request('PUT', url, {
    ...original, properties: { os: 'Edited', description: 'edited' }, public: true, auto_update: true, expires_at: '2031-01-02T03:04:05Z',
  }, { 'if-match': String(before.headers.etag) });
  t.is(put.status, 200, put.body);
  let now = (await d.request('GET', url)).json.metadata;
  t.deepEqual(now.properties, { description: 'edited', os: 'Edited' });
  t.is(now.public, true);
  t.is(now.auto_update, true);
  t.is(now.expires_at, '2031-01-02T03:04:05Z');
  t.regex((await lxc(d.socket, 'image', 'info', 'bb')).stdout, /Expires: 2031\/01\/02 03:04 UTC/);

  t.is((await d.request('PATCH', url, { properties: { extra: 'x' } })).status, 200);
  now = (await d.request('GET', `/1.0/images/${bbFingerprint.slice(0, 8)}`)).json.metadata;
  t.deepEqual(now.properties, { description: 'edited', extra: 'x', os: 'Edited' });
  t.is(now.public, true);
  t.is(now.expires_at, '2031-01-02T03:04:05Z');

  t.is((await d.request('PUT', url, original, { 'if-match': String(before.headers.etag) })).status, 412);
  t.is((await d.request('PUT', url, { expires_at: 'next tuesday' })).status, 400);
  t.is((await d.request('PUT', url, { properties: { n: 1 } })).status, 400);
  t.is((await d.request('PUT', url, { public: 'yes please' })).status, 400);
  t.is((await d.request('PUT', '/1.0/images/ffff', original)).status, 404);
  t.true(events('image-updated').filter((e) => e.metadata.source === url).length >= 2);

  t.is((await d.request('PUT', url, { ...original, expires_at: '' })).status, 200);
  now = (await d.request('GET', url)).json.metadata;
  t.deepEqual(now.properties, original.properties);
  t.is(now.public, false);
  // An empty date keeps the one set.
  t.is(now.expires_at, '2031-01-02T03:04:05Z');
});

test.serial('GET /1.0/images: recursion, filters on properties and type, 404s', async (t) => {
  const urls = (await d.request('GET', '/1.0/images')).json.metadata;
  t.deepEqual(urls, [`/1.0/images/${bbFingerprint}`]);
  const filter = (f: string) => d.request('GET', `/1.0/images?recursion=1&filter=${encodeURIComponent(f)}`).then((r) => r.json.metadata.map((i: any) => i.fingerprint));
  t.deepEqual(await filter('properties.os eq Busybox'), [bbFingerprint]);
  t.deepEqual(await filter('Properties.os eq Busybox and type eq container'), [bbFingerprint]);
  t.deepEqual(await filter('properties.os eq Nope'), []);
  t.deepEqual(await filter('type eq virtual-machine'), []);
  t.deepEqual((await d.request('GET', `/1.0/images?filter=${encodeURIComponent('architecture eq x86_64')}`)).json.metadata, [`/1.0/images/${bbFingerprint}`]);
  t.is((await d.request('GET', '/1.0/images/ffff')).status, 404);
  t.is((await d.request('GET', '/1.0/images/not-a-fingerprint')).status, 404);
  t.is((await d.request('GET', '/1.0/images/ffff/export')).status, 404);
  t.is((await d.request('DELETE', '/1.0/images/ffff')).status, 404);
});

test.serial('bad uploads get a 400 and leave no file and no record', async (t) => {
  const filesBefore = imageFiles(d);
  const listBefore = (await d.request('GET', '/1.0/images')).json.metadata;
  const dir = mkdtempSync(path.join(scratch, 'bad-'));
  const truncated = path.join(dir, 'truncated.tar.gz');
  writeFileSync(truncated, readFileSync(gz.unified).subarray(0, 20000));
  const squashfs = buildSquashfsRootfs(dir);
  const truncatedSquashfs = path.join(dir, 'truncated.squashfs');
  writeFileSync(truncatedSquashfs, readFileSync(squashfs).subarray(0, 50000));
  const plainTar = gunzipSync(readFileSync(gz.unified));
  const damagedTar = Buffer.from(plainTar);
  damagedTar[5]! ^= 0xff; // inside the first member's name: its header checksum no longer matches
  const truncatedXz = execFileSync('xz', ['-c'], { input: plainTar }).subarray(0, 30000);
  const cases: [string, Buffer, Record<string, string>][] = [
    ['garbage', Buffer.from('this is not an image\n'), OCTET],
    ['damaged plain tar', damagedTar, OCTET],
    ['truncated plain tar', plainTar.subarray(0, 100000), OCTET],
    ['truncated xz', truncatedXz, OCTET],
    ['empty body', Buffer.alloc(0), OCTET],
    ['truncated gzip', readFileSync(truncated), OCTET],
    ['no metadata.yaml', readFileSync(buildUnified(dir, 'nometa.tar.gz', {})), OCTET],
    ['no rootfs', readFileSync(buildUnified(dir, 'noroot.tar.gz', { metadata: goodMetadata(), rootfs: false })), OCTET],
    ['unknown architecture', readFileSync(buildUnified(dir, 'arch.tar.gz', { metadata: 'architecture: vax\ncreation_date: 1700000000\n' })), OCTET],
    ['no creation date', readFileSync(buildUnified(dir, 'date.tar.gz', { metadata: 'architecture: x86_64\n' })), OCTET],
    ['invalid YAML', readFileSync(buildUnified(dir, 'yaml.tar.gz', { metadata: 'architecture: [x86_64\n' })), OCTET],
    ['fingerprint mismatch', readFileSync(gz.unified), { ...OCTET, 'x-lxd-fingerprint': 'ab'.repeat(32) }],
    ['unknown push secret', readFileSync(gz.unified), { ...OCTET, 'x-lxd-secret': 'nope' }],
    ['JSON url source without its url', Buffer.from(JSON.stringify({ source: { type: 'url' } })), { 'content-type': 'application/json' }],
    ['JSON instance source', Buffer.from(JSON.stringify({ source: { type: 'instance', name: 'c1' } })), { 'content-type': 'application/json' }],
    ['JSON unknown source', Buffer.from(JSON.stringify({ source: { type: 'bogus' } })), { 'content-type': 'application/json' }],
    ['JSON without a type header', Buffer.from('{}'), {}],
    ['invalid JSON', Buffer.from('{"source":'), { 'content-type': 'application/json' }],
  ];
  const multipart: [string, { name: string; filename: string; file: string }[]][] = [
    ['parts swapped', [{ name: 'rootfs', filename: 'r', file: gz.rootfs }, { name: 'metadata', filename: 'm', file: gz.metadata }]],
    ['metadata only', [{ name: 'metadata', filename: 'm', file: gz.metadata }]],
    ['truncated squashfs', [{ name: 'metadata', filename: 'm', file: gz.metadata }, { name: 'rootfs', filename: 'r', file: truncatedSquashfs }]],
    ['truncated rootfs tarball', [{ name: 'metadata', filename: 'm', file: gz.metadata }, { name: 'rootfs', filename: 'r', file: truncated }]],
    ['metadata part not a tarball', [{ name: 'metadata', filename: 'm', file: squashfs }, { name: 'rootfs', filename: 'r', file: gz.rootfs }]],
    ['qcow2 part with a tarball', [{ name: 'metadata', filename: 'm', file: gz.metadata }, { name: 'rootfs.img', filename: 'r', file: gz.rootfs }]],
  ];
  for (const [what, parts] of multipart) {
    const { body, contentType } = multipartBody(parts);
    cases.push([`multipart: ${what}`, body, { 'content-type': contentType }]);
  }
  for (const [what, body, headers] of cases) {
    const r = await upload(d, body, headers);
    t.is(r.status, 400, `${what}: ${JSON.stringify(r.json)}`);
    t.is(r.json?.type, 'error', what);
    t.is(r.json?.error_code, 400, what);
    t.log(`${what}: ${r.json?.error}`);
  }
  t.deepEqual(imageFiles(d), filesBefore);
  t.deepEqual(staged(d), []);
  t.deepEqual((await d.request('GET', '/1.0/images')).json.metadata, listBefore);
});

test.serial('a duplicate import fails in its operation, as the reference does', async (t) => {
  const again = await lxc(d.socket, 'image', 'import', gz.unified);
  t.not(again.status, 0);
  t.regex(again.stderr, /Image with same fingerprint already exists/);
  const r = await upload(d, readFileSync(gz.unified));
  t.is(r.status, 202);
  t.is(r.op.status_code, 400);
  t.is(r.op.err, 'Image with same fingerprint already exists');
  t.deepEqual(r.op.metadata, { fingerprint: bbFingerprint, size: String(statSync(gz.unified).size) });
  t.deepEqual(staged(d), []);
});

test.serial('push mode: aliases, properties, visibility and expiry given in the create body (image_create_aliases)', async (t) => {
  const file = buildUnified(scratch, 'pushed.tar.gz', { metadata: goodMetadata() });
  const fp = sha256(file);
  const body = {
    source: { type: 'image', mode: 'push', fingerprint: fp },
    aliases: [{ name: 'pushed', description: 'given up front' }, { name: 'pushed-too' }],
    expires_at: '2030-06-07T08:09:10Z',
    public: true,
    properties: { os: 'Pushed' },
  };
  const token = await d.request('POST', '/1.0/images', body, { 'content-type': 'application/json' });
  t.is(token.status, 202);
  const tokenOp = token.json.metadata;
  t.is(tokenOp.class, 'token');
  t.deepEqual(tokenOp.resources, { images: [`/1.0/images/${fp}`] });
  const secret = tokenOp.metadata.secret;
  t.regex(secret, /^[0-9a-f]{64}$/);

  const taken = await d.request('POST', '/1.0/images/aliases', { name: 'pushed', target: bbFingerprint });
  t.is(taken.status, 200);
  const blocked = await d.request('POST', '/1.0/images', { ...body }, { 'content-type': 'application/json' });
  t.is(blocked.status, 409, 'an alias that exists already is refused before any upload');
  t.is((await d.request('DELETE', '/1.0/images/aliases/pushed')).status, 200);

  const r = await upload(d, readFileSync(file), { ...OCTET, 'x-lxd-secret': secret, 'x-lxd-fingerprint': fp, 'x-lxd-properties': 'extra=from%20header' });
  t.is(r.op.status, 'Success', r.op.err);
  const image = (await d.request('GET', `/1.0/images/${fp}`)).json.metadata;
  t.deepEqual(image.aliases, [{ name: 'pushed', description: 'given up front' }, { name: 'pushed-too', description: '' }]);
  t.is(image.public, true);
  t.is(image.expires_at, '2030-06-07T08:09:10Z');
  t.deepEqual(image.properties, { extra: 'from header', os: 'Pushed' });
  t.is((await d.request('GET', '/1.0/images/aliases/pushed')).json.metadata.target, fp);
  t.is((await waitOp(d, `/1.0/operations/${tokenOp.id}`)).status, 'Success');
  t.truthy(events('image-alias-created').find((e) => e.metadata.source === '/1.0/images/aliases/pushed-too'));

  // A secret is good for one upload; a bad fingerprint is refused.
  t.is((await upload(d, readFileSync(file), { ...OCTET, 'x-lxd-secret': secret })).status, 400);
  t.is((await d.request('POST', '/1.0/images', { source: { mode: 'push', fingerprint: 'abc' } }, { 'content-type': 'application/json' })).status, 400);
  const other = await d.request('POST', '/1.0/images', { source: { type: 'image', mode: 'push', fingerprint: bbFingerprint } }, { 'content-type': 'application/json' });
  const mismatch = await upload(d, readFileSync(file), { ...OCTET, 'x-lxd-secret': other.json.metadata.metadata.secret });
  t.is(mismatch.status, 400);
  t.regex(mismatch.json.error, /Fingerprints don't match/);

  t.is((await lxc(d.socket, 'image', 'delete', fp)).status, 0);
  t.is((await d.request('GET', '/1.0/images/aliases/pushed-too')).status, 404);
});

test.serial('lxc image delete removes the record, its aliases and its files, and emits image-deleted', async (t) => {
  const img = buildBusyboxImage('xz');
  try {
    t.is((await lxc(d.socket, 'image', 'import', img.unified, '--alias', 'doomed', '--public', 'release=edge', 'note=two words')).status, 0);
    const fp = sha256(img.unified);
    const record = (await d.request('GET', `/1.0/images/${fp}`)).json.metadata;
    t.is(record.public, true);
    t.is(record.properties.release, 'edge');
    t.is(record.properties.note, 'two words');
    t.true(imageFiles(d).includes(fp));
    const del = await lxc(d.socket, 'image', 'delete', 'doomed');
    t.is(del.status, 0, del.stderr);
    t.is((await d.request('GET', `/1.0/images/${fp}`)).status, 404);
    t.is((await d.request('GET', '/1.0/images/aliases/doomed')).status, 404);
    t.false(imageFiles(d).includes(fp));
    await waitFor(() => events('image-deleted').some((e) => e.metadata.source === `/1.0/images/${fp}`), 5000, 'image-deleted');
    const deleted = events('image-deleted').find((e) => e.metadata.source === `/1.0/images/${fp}`);
    t.is(deleted.metadata.requestor.protocol, 'unix');
    // Deleting an image removes its aliases without separate alias events, as the reference does.
    t.false(events('image-alias-deleted').some((e) => e.metadata.source === '/1.0/images/aliases/doomed'));
  } finally {
    rmSync(img.dir, { recursive: true, force: true });
  }
});

test.serial('images.compression_algorithm is a server key (image_compression_algorithm)', async (t) => {
  t.is((await lxc(d.socket, 'config', 'set', 'images.compression_algorithm', 'xz')).status, 0);
  t.is((await lxc(d.socket, 'config', 'get', 'images.compression_algorithm')).stdout.trim(), 'xz');
  const bad = await lxc(d.socket, 'config', 'set', 'images.compression_algorithm', 'rar');
  t.not(bad.status, 0);
  t.regex(bad.stderr, /images\.compression_algorithm/);
  t.is((await d.request('PATCH', '/1.0', { config: { 'images.compression_algorithm': 'squashfs' } })).status, 200);
  t.is((await d.request('GET', '/1.0')).json.metadata.config['images.compression_algorithm'], 'squashfs');
  t.is((await lxc(d.socket, 'config', 'unset', 'images.compression_algorithm')).status, 0);
  t.is((await d.request('GET', '/1.0')).json.metadata.config['images.compression_algorithm'], undefined);
});

test.serial('import time of the busybox image over the API (median of 5)', async (t) => {
  const img = buildBusyboxImage('gzip');
  try {
    const times: number[] = [];
    for (let i = 0; i < 5; i++) {
      const started = performance.now();
      const r = await upload(d, readFileSync(img.unified));
      times.push(performance.now() - started);
      t.is(r.op.status, 'Success');
      t.is((await d.request('DELETE', `/1.0/images/${r.op.metadata.fingerprint}`)).status, 202);
      await waitFor(async () => (await d.request('GET', `/1.0/images/${r.op.metadata.fingerprint}`)).status === 404, 5000, 'the delete');
    }
    times.sort((a, b) => a - b);
    t.log(`POST /1.0/images + operation wait, busybox gzip ${(statSync(img.unified).size / 1e6).toFixed(2)} MB: median ${times[2]!.toFixed(1)} ms (min ${times[0]!.toFixed(1)}, max ${times[4]!.toFixed(1)})`);
  } finally {
    rmSync(img.dir, { recursive: true, force: true });
  }
});

test.serial('after a restart records remain, and crash leftovers are removed', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-images-restart-'));
  try {
    let daemon = await startDaemon({ plugins: 'images', dir });
    t.is((await lxc(daemon.socket, 'image', 'import', gz.metadata, gz.rootfs, '--alias', 'kept')).status, 0);
    const fp = sha256(gz.metadata, gz.rootfs);
    await daemon.stop();
    // What a kill -9 can leave: an upload in staging, files installed without their record.
    const orphan = 'ab'.repeat(32);
    writeFileSync(path.join(dir, 'images', orphan), 'orphan');
    writeFileSync(path.join(dir, 'images', `${orphan}.rootfs`), 'orphan');
    mkdirSync(path.join(dir, 'images', '.staging', 'interrupted'));
    writeFileSync(path.join(dir, 'images', '.staging', 'interrupted', 'image'), 'partial');
    daemon = await startDaemon({ plugins: 'images', dir });
    t.deepEqual(imageFiles(daemon), [fp, `${fp}.rootfs`]);
    t.deepEqual(staged(daemon), []);
    t.is((await daemon.request('GET', '/1.0/images/aliases/kept')).json.metadata.target, fp);
    const out = path.join(dir, 'out');
    t.is((await lxc(daemon.socket, 'image', 'export', 'kept', out)).status, 0);
    t.deepEqual(readFileSync(`${out}.root`), readFileSync(gz.rootfs));
    await daemon.stop();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('ImagesService.unpack keeps ownership, modes, symlinks and xattrs; resolve and markUsed', async (t) => {
  const k = await startTestKernel({ plugins: ['images'] });
  const work = mkdtempSync(path.join(tmpdir(), 'corral-unpack-'));
  try {
    const post = async (payload: Buffer, contentType: string) => {
      const res = await k.kernel.inject({ method: 'POST', url: '/1.0/images', payload, headers: { 'content-type': contentType } });
      const body = JSON.parse(res.payload);
      t.is(res.statusCode, 202, res.payload);
      const op = JSON.parse((await k.kernel.inject({ url: `${body.operation}/wait?timeout=60` })).payload).metadata;
      t.is(op.status, 'Success', op.err);
      return op.metadata.fingerprint as string;
    };
    const service = k.kernel.services.get(ImagesServiceRef)!;

    // Unified tarball with an xattr, foreign ownership, setuid bit and an absolute symlink.
    const unified = buildUnified(work, 'xattr.tar.gz', { metadata: goodMetadata('templates:\n  /etc/hello:\n    when: [create]\n    template: hello.tpl\n') });
    const fp1 = await post(readFileSync(unified), 'application/octet-stream');
    const dir1 = path.join(work, 'unified');
    await service.unpack(fp1, dir1);
    t.regex(readFileSync(path.join(dir1, 'metadata.yaml'), 'utf8'), /architecture: x86_64/);
    t.is(readFileSync(path.join(dir1, 'templates/hello.tpl'), 'utf8'), 'hello {{ container.name }}\n');
    const owned = statSync(path.join(dir1, 'rootfs/etc/owned'));
    t.is(owned.uid, 1234);
    t.is(owned.gid, 5678);
    t.is(statSync(path.join(dir1, 'rootfs/etc/suid')).mode & 0o7777, 0o4755);
    t.is(readlinkSync(path.join(dir1, 'rootfs/etc/link')), '/etc/tagged');
    t.is(execFileSync('getfattr', ['--absolute-names', '--only-values', '-n', 'user.corral', path.join(dir1, 'rootfs/etc/tagged')], { encoding: 'utf8' }), 'kept');

    const record = await service.resolve('default', { fingerprint: fp1.slice(0, 10) });
    t.is(record.fingerprint, fp1);
    t.is(record.properties.os, 'Handmade');
    t.is(record.last_used_at, '0001-01-01T00:00:00Z');
    await service.markUsed('default', fp1);
    t.not((await service.resolve('default', { fingerprint: fp1 })).last_used_at, '0001-01-01T00:00:00Z');
    await t.throwsAsync(service.resolve('default', { alias: 'nope' }), { message: /not found/ });
    await t.throwsAsync(service.resolve('default', { fingerprint: 'ffff' }), { message: /Image not found/ });
    await t.throwsAsync(service.unpack('ff'.repeat(32), path.join(work, 'none')), { message: /Image not found/ });

    // Split with a squashfs rootfs: unsquashfs keeps the ids and modes of the busybox tree.
    const squashfs = buildSquashfsRootfs(work);
    const { body, contentType } = multipartBody([
      { name: 'metadata', filename: 'meta.tar.gz', file: gz.metadata },
      { name: 'rootfs', filename: 'rootfs.squashfs', file: squashfs },
    ]);
    const fp2 = await post(body, contentType);
    t.is(fp2, sha256(gz.metadata, squashfs));
    t.is((await k.kernel.inject({ method: 'POST', url: '/1.0/images/aliases', payload: JSON.stringify({ name: 'sq', target: fp2 }), headers: { 'content-type': 'application/json' } })).statusCode, 200);
    t.is((await service.resolve('default', { alias: 'sq' })).fingerprint, fp2);
    const dir2 = path.join(work, 'squashfs');
    mkdirSync(dir2);
    await service.unpack(fp2, dir2);
    t.true(existsSync(path.join(dir2, 'metadata.yaml')));
    t.true(existsSync(path.join(dir2, 'templates/hostname.tpl')));
    t.true(statSync(path.join(dir2, 'rootfs/bin/busybox')).isFile());
    t.is(readlinkSync(path.join(dir2, 'rootfs/bin/sh')), 'busybox');
    t.is(statSync(path.join(dir2, 'rootfs/home/user')).uid, 1000);
    t.is(statSync(path.join(dir2, 'rootfs/tmp')).mode & 0o7777, 0o1777);
    t.true(lstatSync(path.join(dir2, 'rootfs/sbin/init')).isSymbolicLink());

    // Every compression unpacks through tar, lz4 and lzma included (made here from the plain tarball).
    const plain = gunzipSync(readFileSync(gz.unified));
    const compressors: Record<string, string[]> = { xz: ['xz', '-c'], lzma: ['xz', '--format=lzma', '-c'], lz4: ['lz4', '-c', '-q'], zstd: ['zstd', '-c', '-q'], bzip2: ['bzip2', '-c'] };
    for (const [name, [command, ...args]] of Object.entries(compressors)) {
      const fp = await post(execFileSync(command!, args, { input: plain, maxBuffer: 64 * 1024 * 1024 }), 'application/octet-stream');
      const dir = path.join(work, name);
      await service.unpack(fp, dir);
      t.true(statSync(path.join(dir, 'rootfs/bin/busybox')).isFile(), name);
      t.is(statSync(path.join(dir, 'rootfs/home/user')).uid, 1000, name);
      t.true(existsSync(path.join(dir, 'templates/hostname.tpl')), name);
    }
  } finally {
    await k.stop();
    rmSync(work, { recursive: true, force: true });
  }
});

test('the in-process tar walk reads GNU, pax and ustar names, skips sparse data, refuses damage', (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-tarwalk-'));
  try {
    const deep = path.join(dir, 't', 'd'.repeat(60), 'e'.repeat(60));
    mkdirSync(deep, { recursive: true });
    const longFile = path.join(deep, `${'f'.repeat(90)}.txt`);
    writeFileSync(longFile, 'deep\n');
    // A sparse file with more data segments than an old GNU header holds (extension blocks follow it).
    const sparse = path.join(dir, 't', 'sparse');
    execFileSync('python3', ['-c', `f=open(${JSON.stringify(sparse)},'wb')\nfor i in range(10):\n  f.seek(i*1048576); f.write(b'x'*5000)\nf.truncate(11*1048576)`]);
    writeFileSync(path.join(dir, 't', 'metadata.yaml'), 'architecture: x86_64\n');
    for (const format of ['gnu', 'pax', 'ustar']) {
      const file = path.join(dir, `${format}.tar`);
      execFileSync('tar', ['-C', dir, '-cf', file, `--format=${format}`, ...(format === 'ustar' ? [] : ['-S']), '--sort=name', 't']);
      const bytes = readFileSync(file);
      const names: string[] = [];
      let content = '';
      const walker = new TarWalker('image tarball', (e) => {
        names.push(e.name);
        return e.name.endsWith('metadata.yaml');
      }, (_e, data) => (content = data.toString()));
      // Odd chunk sizes: headers and data cross chunk boundaries.
      for (let i = 0; i < bytes.length; i += 777) walker.push(bytes.subarray(i, i + 777));
      walker.finish();
      for (const name of ['t/', 't/metadata.yaml', 't/sparse', path.relative(dir, longFile)]) t.true(names.includes(name), `${format}: ${name}`);
      t.is(content, 'architecture: x86_64\n', format);

      const cut = new TarWalker('image tarball', () => false);
      cut.push(bytes.subarray(0, 1500));
      t.throws(() => cut.finish(), { message: /truncated/ }, format);
      const damaged = Buffer.from(bytes);
      damaged[5]! ^= 0x55;
      t.throws(() => new TarWalker('image tarball', () => false).push(damaged), { message: /checksum/ }, format);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test.serial('pylxd: images.create (unified and split), aliases, save, export, delete', async (t) => {
  const script = path.join(scratch, 'pylxd_images.py');
  writeFileSync(script, [
    'import json, sys, urllib.parse, pylxd',
    "c = pylxd.Client(endpoint='http+unix://' + urllib.parse.quote(sys.argv[1], safe=''))",
    "unified = c.images.create(open(sys.argv[2], 'rb').read(), public=True, wait=True)",
    "split = c.images.create(open(sys.argv[4], 'rb').read(), metadata=open(sys.argv[3], 'rb').read(), wait=True)",
    "unified.add_alias('py', 'from pylxd')",
    "unified.properties['os'] = 'PyEdited'",
    'unified.save(wait=True)',
    'exported = len(unified.export().read())',
    "out = {'unified': unified.fingerprint, 'public': c.images.get(unified.fingerprint).public, 'split': split.fingerprint,",
    "       'alias': c.images.get_by_alias('py').fingerprint, 'os': c.images.get(unified.fingerprint).properties['os'], 'exported': exported}",
    "unified.delete_alias('py')",
    'unified.delete(wait=True)',
    'split.delete(wait=True)',
    "out['left'] = [i.fingerprint for i in c.images.all()]",
    'print(json.dumps(out))',
  ].join('\n'));
  const img = buildBusyboxImage('zstd');
  try {
    const r = await python(script, [d.socket, img.unified, img.metadata, img.rootfs]);
    t.is(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    t.is(out.unified, sha256(img.unified));
    t.is(out.split, sha256(img.metadata, img.rootfs));
    t.is(out.public, true);
    t.is(out.alias, out.unified);
    t.is(out.os, 'PyEdited');
    t.is(out.exported, statSync(img.unified).size);
    t.deepEqual(out.left, [bbFingerprint]);
  } finally {
    rmSync(img.dir, { recursive: true, force: true });
  }
});
