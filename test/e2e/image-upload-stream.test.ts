/**
 * Uploads are written to their staging file as they arrive, with the disk allowed to fall a few MB
 * behind the network (plugins/images/upload.ts), and a plain tarball is walked on its way in
 * rather than read again (walk-as-received.ts). What must hold whatever the buffering: a client
 * that hangs up mid-way leaves no staged file, no open file and no record; a multipart body whose
 * data looks like the start of its boundary, cut anywhere, is kept byte for byte; a plain tarball
 * checked while arriving is recorded as the file pass would record it, and is read from disk no
 * second time (plain and gzip).
 */
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { readMultipart } from '../../plugins/images/multipart.js';
import { hasLxc, lxc } from '../helpers/clients.js';
import { startDaemon, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { buildLargeImage, type LargeImage } from '../helpers/large-image.js';
import { goodMetadata, sha256 } from '../plugins/images_fixtures.js';

const skip = !hasLxc() ? 'the lxc client is not installed' : undefined;

let d: Daemon;
let big: LargeImage;
let scratch: string;

const stagingDir = () => path.join(d.dir, 'images', '.staging');
/** Files under staging, and any of the daemon's descriptors still open on one. */
function leftovers(): { staged: string[]; open: string[] } {
  const open: string[] = [];
  for (const fd of readdirSync(`/proc/${d.child.pid}/fd`)) {
    try {
      const target = readlinkSync(`/proc/${d.child.pid}/fd/${fd}`);
      if (target.includes('/images/.staging/')) open.push(target);
    } catch { /* closed meanwhile */ }
  }
  return { staged: readdirSync(stagingDir()), open };
}

test.before(async () => {
  if (skip) return;
  big = buildLargeImage(24);
  scratch = mkdtempSync(path.join(tmpdir(), 'corral-upload-stream-'));
  d = await startDaemon({ plugins: 'images' });
});

test.after.always(async () => {
  await stopDaemons();
  if (big) rmSync(big.dir, { recursive: true, force: true });
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

test.serial('a client hanging up mid-upload leaves no staged file, no open file and no record; the next upload of the same tarball is whole', async (t) => {
  if (skip) return t.pass(skip);
  const body = readFileSync(big.file);
  const req = http.request({
    socketPath: d.socket, method: 'POST', path: '/1.0/images',
    headers: { 'content-type': 'application/octet-stream', 'content-length': body.length },
  });
  req.on('error', () => { /* the hang-up is ours */ });
  req.write(body.subarray(0, 8 * 1024 * 1024));
  // Wait until bytes have reached the staging file, so the hang-up lands mid-write.
  await waitFor(() => readdirSync(stagingDir()).some((area) => {
    try {
      return statSync(path.join(stagingDir(), area, 'image')).size > 1024 * 1024;
    } catch {
      return false;
    }
  }), 30_000, 'the upload to reach its staging file');
  req.destroy();
  await waitFor(() => {
    const left = leftovers();
    return left.staged.length === 0 && left.open.length === 0;
  }, 15_000, 'the staging area to go');
  t.deepEqual(leftovers(), { staged: [], open: [] });
  t.deepEqual((await d.request('GET', '/1.0/images')).json.metadata, []);

  const imported = await lxc(d.socket, 'image', 'import', big.file, '--alias', 'big');
  t.is(imported.status, 0, imported.stderr);
  const fp = sha256(big.file);
  const shown = JSON.parse((await lxc(d.socket, 'image', 'list', '--format', 'json')).stdout);
  t.is(shown.length, 1);
  t.is(shown[0].fingerprint, fp);
  t.is(shown[0].size, body.length);
  t.is(shown[0].type, 'container');
  t.is(shown[0].architecture, 'x86_64');
  // The record's metadata came from the walk done while the bytes arrived.
  t.is(shown[0].properties.os, 'Busybox');
  t.true(readFileSync(path.join(d.dir, 'images', fp)).equals(body), 'the stored file is the tarball sent');
  t.deepEqual(leftovers(), { staged: [], open: [] });
  t.is((await lxc(d.socket, 'image', 'delete', fp)).status, 0);
});

/** Bytes the daemon has read through read(2) so far: sockets and files alike (/proc/<pid>/io rchar). */
const bytesRead = () => Number(/^rchar: (\d+)$/m.exec(readFileSync(`/proc/${d.child.pid}/io`, 'utf8'))![1]);

test.serial('a plain or gzip tarball is checked as it arrives: the daemon reads it once (off the socket), not again from its staging file', async (t) => {
  if (skip) return t.pass(skip);
  const gzipped = path.join(scratch, 'big.tar.gz');
  execFileSync('sh', ['-c', `gzip -1 -c '${big.file}' > '${gzipped}'`]);
  for (const file of [big.file, gzipped]) {
    const fp = sha256(file);
    const size = statSync(file).size;
    const before = bytesRead();
    const res = await d.request('POST', '/1.0/images', readFileSync(file), { 'content-type': 'application/octet-stream' });
    t.is(res.status, 202, JSON.stringify(res.json));
    const op = (await d.request('GET', `${res.json.operation}/wait?timeout=60`)).json.metadata;
    t.is(op.status, 'Success', op.err);
    t.is(op.metadata.fingerprint, fp);
    const read = bytesRead() - before;
    t.log(`${path.basename(file)}: ${size} bytes sent, the daemon read ${read}`);
    // Once is the body itself (plus headers and the API's small answers); a second pass would double it.
    t.true(read < size * 1.25, `${path.basename(file)}: read ${read} bytes for a ${size}-byte upload`);
    const record = (await d.request('GET', `/1.0/images/${fp}`)).json.metadata;
    t.is(record.type, 'container');
    t.is(record.properties.os, 'Busybox');
    t.is((await d.request('DELETE', `/1.0/images/${fp}`)).status, 202);
    await waitFor(async () => (await d.request('GET', `/1.0/images/${fp}`)).status === 404, 15_000, 'the image to go');
  }
  t.deepEqual(leftovers(), { staged: [], open: [] });
});

/** A rootfs tarball whose one file is full of every proper prefix of the delimiter (CRLF, "--", the boundary). */
function lookalikeRootfs(dir: string, boundary: string): string {
  const tree = mkdtempSync(path.join(dir, 'tree-'));
  const pieces: Buffer[] = [];
  for (let i = 0; i < 2000; i++) {
    // Each lookalike is one byte short of the delimiter at most, and an "x" follows it, never the byte that would complete it.
    pieces.push(Buffer.from('x'), randomBytes(500 + (i % 37)));
    pieces.push(Buffer.from(`\r\n--${boundary}`.slice(0, 1 + (i % (boundary.length + 3)))));
  }
  execFileSync('mkdir', ['-p', path.join(tree, 'rootfs')]);
  writeFileSync(path.join(tree, 'rootfs', 'lookalike'), Buffer.concat(pieces));
  const out = path.join(dir, 'rootfs.tar');
  execFileSync('tar', ['-cf', out, '--numeric-owner', '-C', tree, 'rootfs']);
  return out;
}

function metadataTarball(dir: string): string {
  const tree = mkdtempSync(path.join(dir, 'meta-'));
  writeFileSync(path.join(tree, 'metadata.yaml'), goodMetadata());
  const out = path.join(dir, 'meta.tar');
  execFileSync('tar', ['-cf', out, '-C', tree, 'metadata.yaml']);
  return out;
}

const BOUNDARY = 'corral-lookalike-boundary-0123456789';

function splitBody(meta: Buffer, rootfs: Buffer): Buffer {
  const head = (name: string) => Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"; filename="${name}"\r\n\r\n`);
  return Buffer.concat([head('metadata'), meta, Buffer.from('\r\n'), head('rootfs'), rootfs, Buffer.from(`\r\n--${BOUNDARY}--\r\n`)]);
}

test.serial('a split upload whose rootfs is full of boundary lookalikes is stored byte for byte', async (t) => {
  if (skip) return t.pass(skip);
  const dir = mkdtempSync(path.join(scratch, 'split-'));
  const meta = metadataTarball(dir);
  const rootfs = lookalikeRootfs(dir, BOUNDARY);
  const res = await d.request('POST', '/1.0/images', splitBody(readFileSync(meta), readFileSync(rootfs)), { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` });
  t.is(res.status, 202, JSON.stringify(res.json));
  const op = (await d.request('GET', `${res.json.operation}/wait?timeout=60`)).json.metadata;
  t.is(op.status, 'Success', op.err);
  const fp = sha256(meta, rootfs);
  t.is(op.metadata.fingerprint, fp);
  t.true(readFileSync(path.join(d.dir, 'images', fp)).equals(readFileSync(meta)));
  t.true(readFileSync(path.join(d.dir, 'images', `${fp}.rootfs`)).equals(readFileSync(rootfs)));
  t.deepEqual(leftovers(), { staged: [], open: [] });
});

test('the multipart reader gives back every byte whatever the chunks are cut at, and keeps a boundary cut in two', async (t) => {
  const meta = Buffer.from('meta\r\n-');
  const lookalikes = Buffer.concat([...Array(BOUNDARY.length + 3).keys()].map((n) => Buffer.concat([Buffer.from('x'), Buffer.from(`\r\n--${BOUNDARY}`.slice(0, n))])));
  const body = splitBody(meta, lookalikes);
  for (const size of [1, 2, 3, 7, 16, 41, 64, 1000]) {
    const parts: Record<string, Buffer[]> = {};
    let current = '';
    const chunks = async function* () {
      for (let at = 0; at < body.length; at += size) yield body.subarray(at, at + size);
    };
    await readMultipart(chunks(), BOUNDARY, {
      async start(part) {
        current = part.name;
        parts[current] = [];
      },
      data: (chunk) => {
        // Copied: a reader may hand over views of buffers it later reuses.
        parts[current]!.push(Buffer.from(chunk));
        return undefined;
      },
      async end() {},
    });
    t.true(Buffer.concat(parts.metadata ?? []).equals(meta), `metadata, chunks of ${size}`);
    t.true(Buffer.concat(parts.rootfs ?? []).equals(lookalikes), `rootfs, chunks of ${size}`);
  }
});
