/**
 * The instance file API through a real daemon (edge set): push, pull and delete on stopped and
 * running containers, bad input, and every way of reaching outside the root filesystem.
 * Malicious links are planted straight into the rootfs on disk, as a container's root could.
 */
import test, { type ExecutionContext } from 'ava';
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import {
  existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { collect, stopDaemons, waitFor, type Daemon, type HttpResult, startWithPool } from '../helpers/daemon.js';
import { importImage } from '../helpers/api.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { lxc, lxcOk } from '../helpers/clients.js';
import { withLxcClient } from '../helpers/needs.js';

/** Tests that drive the lxc client: skipped, saying so, where it is not installed. */
const lxcTest = withLxcClient();

let d: Daemon;
let image: BusyboxImage;
let host: string;
let sentinelDir: string;
let sentinelFile: string;
let victimFile: string;
let lifecycle: any[];
const STOPPED = 'fstop';
const RUNNING = 'frun';
const SECRET = 'HOST SECRET\n';

const rootfs = (name: string) => path.join(d.dir, 'storage-pools', 'default', 'containers', name, 'rootfs');
const url = (name: string, p: string, prefix = '/1.0/instances') => `${prefix}/${name}/files?path=${encodeURIComponent(p)}`;

function pull(name: string, p: string): Promise<HttpResult> {
  return d.request('GET', url(name, p));
}

function push(name: string, p: string, body: string | Buffer = '', headers: Record<string, string> = {}): Promise<HttpResult> {
  return d.request('POST', url(name, p), Buffer.from(body), { 'content-type': 'application/octet-stream', ...headers });
}

function remove(name: string, p: string): Promise<HttpResult> {
  return d.request('DELETE', url(name, p));
}

async function wait(res: HttpResult): Promise<any> {
  const op = await d.request('GET', `${res.json.operation}/wait?timeout=60`);
  return op.json.metadata;
}

/** What must never change on the host: content, owner, mode, inode and the sentinel dir's entries. */
function hostSnapshot() {
  const one = (p: string) => {
    const st = lstatSync(p);
    return { ino: st.ino, uid: st.uid, gid: st.gid, mode: st.mode, mtimeMs: st.mtimeMs, content: st.isFile() ? readFileSync(p, 'utf8') : null };
  };
  return { dir: one(sentinelDir), entries: readdirSync(sentinelDir).sort(), secret: one(sentinelFile), victim: one(victimFile) };
}
let pristine: ReturnType<typeof hostSnapshot>;

function assertHostUntouched(t: ExecutionContext) {
  t.deepEqual(hostSnapshot(), pristine, 'the host sentinel is untouched');
}

/** The sentinel's own path, recreated inside the container (where in-root resolution must land). */
function mirror(name: string): { dir: string; secret: string; victim: string } {
  const dir = path.join(rootfs(name), sentinelDir);
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'secret.txt'), 'CONTAINER COPY\n');
  writeFileSync(path.join(dir, 'victim'), 'container victim\n');
  return { dir, secret: path.join(dir, 'secret.txt'), victim: path.join(dir, 'victim') };
}

function dropMirror(name: string) {
  rmSync(path.join(rootfs(name), host), { recursive: true, force: true });
}

/** A relative link target from `/root/...` in the container that climbs far above any root. */
const climb = (hostPath: string) => `${'../'.repeat(20)}${hostPath.slice(1)}`;

test.before(async () => {
  image = buildBusyboxImage('gzip');
  host = mkdtempSync(path.join(tmpdir(), 'corral-files-host-'));
  sentinelDir = path.join(host, 'secret-dir');
  mkdirSync(sentinelDir);
  sentinelFile = path.join(sentinelDir, 'secret.txt');
  victimFile = path.join(sentinelDir, 'victim');
  writeFileSync(sentinelFile, SECRET, { mode: 0o600 });
  writeFileSync(victimFile, 'victim\n', { mode: 0o600 });
  pristine = hostSnapshot();

  d = await startWithPool();
  await importImage(d, image.unified, 'bb');
  for (const name of [STOPPED, RUNNING]) {
    const created = await wait(await d.request('POST', '/1.0/instances', { name, source: { type: 'image', alias: 'bb' } }));
    if (created.status !== 'Success') throw new Error(`creating ${name}: ${created.err}`);
  }
  const started = await wait(await d.request('PUT', `/1.0/instances/${RUNNING}/state`, { action: 'start' }));
  if (started.status !== 'Success') throw new Error(`starting ${RUNNING}: ${started.err}`);
  lifecycle = collect(await d.websocket('/1.0/events?type=lifecycle'));
});

test.after.always(async () => {
  if (d) await d.request('PUT', `/1.0/instances/${RUNNING}/state`, { action: 'stop', force: true }).then(wait).catch(() => undefined);
  await stopDaemons();
  if (image) rmSync(image.dir, { recursive: true, force: true });
  if (host) rmSync(host, { recursive: true, force: true });
});

/** Push, pull and delete of files, directories and symlinks, with every header. */
async function roundTrip(t: ExecutionContext, name: string) {
  const root = rootfs(name);
  // A new file: 0:0 and 0644 by default.
  t.is((await push(name, '/root/a.txt', 'hello\n')).status, 200);
  let st = lstatSync(path.join(root, 'root/a.txt'));
  t.deepEqual([st.uid, st.gid, st.mode & 0o7777], [0, 0, 0o644]);
  let got = await pull(name, '/root/a.txt');
  t.is(got.status, 200);
  t.is(got.body, 'hello\n');
  t.is(got.headers['content-type'], 'application/octet-stream');
  t.is(got.headers['x-lxd-type'], 'file');
  t.is(got.headers['x-lxd-uid'], '0');
  t.is(got.headers['x-lxd-gid'], '0');
  t.is(got.headers['x-lxd-mode'], '0644');

  // Explicit owner and mode, as `lxc file push --uid --gid --mode` sends them, apply to a new file.
  t.is((await push(name, '/root/a.txt', 'owned\n', { 'X-LXD-uid': '1000', 'X-LXD-gid': '1001', 'X-LXD-mode': '0600' })).status, 200);
  st = lstatSync(path.join(root, 'root/a.txt'));
  t.deepEqual([st.uid, st.gid, st.mode & 0o7777], [0, 0, 0o644], 'an existing file keeps its owner and mode, as in the reference');
  t.is(readFileSync(path.join(root, 'root/a.txt'), 'utf8'), 'owned\n');
  rmSync(path.join(root, 'root/a.txt'));
  t.is((await push(name, '/root/a.txt', 'owned\n', { 'X-LXD-uid': '1000', 'X-LXD-gid': '1001', 'X-LXD-mode': '0600' })).status, 200);
  st = lstatSync(path.join(root, 'root/a.txt'));
  t.deepEqual([st.uid, st.gid, st.mode & 0o7777], [1000, 1001, 0o600]);
  got = await pull(name, '/root/a.txt');
  t.deepEqual([got.headers['x-lxd-uid'], got.headers['x-lxd-gid'], got.headers['x-lxd-mode']], ['1000', '1001', '0600']);

  // Overwrite without headers keeps owner and mode (what `lxc file edit` relies on); -1 means "not given".
  t.is((await push(name, '/root/a.txt', 'again\n', { 'X-LXD-uid': '-1', 'X-LXD-gid': '-1', 'X-LXD-mode': '-1' })).status, 200);
  st = lstatSync(path.join(root, 'root/a.txt'));
  t.deepEqual([st.uid, st.gid, st.mode & 0o7777], [1000, 1001, 0o600]);
  t.is(readFileSync(path.join(root, 'root/a.txt'), 'utf8'), 'again\n');

  // Append.
  t.is((await push(name, '/root/a.txt', 'more\n', { 'X-LXD-write': 'append' })).status, 200);
  t.is((await pull(name, '/root/a.txt')).body, 'again\nmore\n');
  t.is((await push(name, '/root/none.txt', 'x', { 'X-LXD-write': 'append' })).status, 404, 'append needs the file, as in the reference');

  // A decimal mode is read as Go reads it (416 = 0640); set-id bits are dropped as the reference does.
  t.is((await push(name, '/root/dec.txt', 'd', { 'X-LXD-mode': '416' })).status, 200);
  t.is(lstatSync(path.join(root, 'root/dec.txt')).mode & 0o7777, 0o640);
  t.is((await push(name, '/root/suid.txt', 's', { 'X-LXD-mode': '04755' })).status, 200);
  t.is(lstatSync(path.join(root, 'root/suid.txt')).mode & 0o7777, 0o755);

  // A binary file of a few MiB goes through the stream intact.
  const big = randomBytes(5 * 1024 * 1024 + 17);
  t.is((await push(name, '/root/big.bin', big)).status, 200);
  const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
  t.is(sha(readFileSync(path.join(root, 'root/big.bin'))), sha(big));
  t.is(sha(await pullBytes(name, '/root/big.bin')), sha(big));

  // Directories: create (default 0750, as the reference), again (a no-op), list, with parents.
  t.is((await push(name, '/root/d', '', { 'X-LXD-type': 'directory' })).status, 200);
  t.is(lstatSync(path.join(root, 'root/d')).mode & 0o7777, 0o750);
  t.is((await push(name, '/root/d2', '', { 'X-LXD-type': 'directory', 'X-LXD-uid': '5', 'X-LXD-gid': '6', 'X-LXD-mode': '0700' })).status, 200);
  st = lstatSync(path.join(root, 'root/d2'));
  t.true(st.isDirectory());
  t.deepEqual([st.uid, st.gid, st.mode & 0o7777], [5, 6, 0o700]);
  t.is((await push(name, '/root/d2', '', { 'X-LXD-type': 'directory', 'X-LXD-mode': '0755' })).status, 200, 'an existing directory is fine');
  t.is(lstatSync(path.join(root, 'root/d2')).mode & 0o7777, 0o700, 'and left as it is');
  t.is((await push(name, '/root/d2/inner.txt', 'in')).status, 200);
  const listing = await pull(name, '/root/d2');
  t.is(listing.status, 200);
  t.deepEqual(listing.json.metadata, ['inner.txt']);
  t.deepEqual([listing.headers['x-lxd-type'], listing.headers['x-lxd-uid'], listing.headers['x-lxd-gid'], listing.headers['x-lxd-mode']], ['directory', '5', '6', '0700']);
  t.true((await pull(name, '/')).json.metadata.includes('etc'));
  t.is((await push(name, '/root/p/q/r', '', { 'X-LXD-type': 'directory' })).status, 200);
  t.true(statSync(path.join(root, 'root/p/q/r')).isDirectory());
  t.is((await push(name, '/root/nodir/x.txt', 'x')).status, 404, 'a file needs its parent');

  // Symlinks: created (not followed), read back as links, the same link again is fine, another target is a conflict.
  t.is((await push(name, '/root/link', '/etc/passwd', { 'X-LXD-type': 'symlink' })).status, 200);
  t.is(readlinkSync(path.join(root, 'root/link')), '/etc/passwd');
  got = await pull(name, '/root/link');
  t.is(got.headers['x-lxd-type'], 'symlink');
  t.is(got.headers['x-lxd-mode'], '0777');
  t.is(got.body, '/etc/passwd');
  t.is((await push(name, '/root/link', '/etc/passwd', { 'X-LXD-type': 'symlink' })).status, 200);
  t.is((await push(name, '/root/link', '/etc/group', { 'X-LXD-type': 'symlink' })).status, 409);
  // Links in the middle of a path are followed inside the container.
  t.is((await push(name, '/root/etc-link', '/etc', { 'X-LXD-type': 'symlink' })).status, 200);
  t.regex((await pull(name, '/root/etc-link/passwd')).body, /^user:x:1000/m);

  // Delete: a file, a link (not its target), an empty directory; not a full one; missing is 404.
  t.is((await remove(name, '/root/a.txt')).status, 200);
  t.false(existsSync(path.join(root, 'root/a.txt')));
  t.is((await remove(name, '/root/link')).status, 200);
  t.false(existsSync(path.join(root, 'root/link')));
  t.true(existsSync(path.join(root, 'etc/passwd')));
  t.is((await remove(name, '/root/d')).status, 200);
  t.false(existsSync(path.join(root, 'root/d')));
  const full = await remove(name, '/root/d2');
  t.is(full.status, 400);
  t.regex(full.json.error, /not empty/i);
  t.true(existsSync(path.join(root, 'root/d2/inner.txt')));
  t.is((await remove(name, '/root/a.txt')).status, 404);
  t.is((await pull(name, '/root/a.txt')).status, 404);
  t.is((await pull(name, '/etc/passwd/x')).status, 404);

  // The legacy prefix serves the same.
  t.is((await d.request('GET', url(name, '/etc/passwd', '/1.0/containers'))).status, 200);
  t.false(readdirSync(path.join(root, 'root')).some((n) => n.startsWith('.corral-upload')), 'no temp files left');
}

function pullBytes(name: string, p: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    http.get({ socketPath: d.socket, path: url(name, p) }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve(Buffer.concat(chunks)));
    }).on('error', reject);
  });
}

test.serial('push, pull and delete on a stopped container (directory_manipulation, file_delete, file_append, file_symlinks, file_get_symlink)', async (t) => {
  await roundTrip(t, STOPPED);
  // Lifecycle events name the path as given.
  await waitFor(() => lifecycle.some((e) => e.metadata.action === 'instance-file-deleted'), 5000, 'events');
  const seen = (action: string, p: string) => lifecycle.some((e) => e.metadata.action === action && e.metadata.context?.path === p
    && e.metadata.source === `/1.0/instances/${STOPPED}`);
  t.true(seen('instance-file-pushed', '/root/a.txt'));
  t.true(seen('instance-file-retrieved', '/root/a.txt'));
  t.true(seen('instance-file-retrieved', '/root/d2'));
  t.true(seen('instance-file-deleted', '/root/a.txt'));
  t.false(lifecycle.some((e) => e.metadata.action === 'instance-file-retrieved' && e.metadata.context?.path === '/root/nope'), 'no event for failures');
});

test.serial('push, pull and delete on a running container', async (t) => {
  await roundTrip(t, RUNNING);
});

// What the test above pushed, seen from inside the container.
lxcTest('push, pull and delete on a running container, seen from inside', async (t) => {
  const inside = async (...cmd: string[]) => {
    const r = await lxc(d.socket, 'exec', RUNNING, '--', ...cmd);
    t.is(r.status, 0, r.stderr);
    return r.stdout.trim();
  };
  t.is((await push(RUNNING, '/root/seen.txt', 'seen\n', { 'X-LXD-uid': '1000', 'X-LXD-gid': '1000', 'X-LXD-mode': '0640' })).status, 200);
  t.is(await inside('stat', '-c', '%u %g %a', '/root/seen.txt'), '1000 1000 640');
  t.is(await inside('cat', '/root/seen.txt'), 'seen');
  t.is(await inside('stat', '-c', '%u %g %a', '/root/d2'), '5 6 700');
  t.is(await inside('readlink', '/root/etc-link'), '/etc');
  // And what the container writes is read back with its own ids.
  await inside('sh', '-c', 'echo from-inside > /home/user/made && chown 1000:1000 /home/user/made && chmod 604 /home/user/made');
  const got = await pull(RUNNING, '/home/user/made');
  t.is(got.body, 'from-inside\n');
  t.deepEqual([got.headers['x-lxd-uid'], got.headers['x-lxd-gid'], got.headers['x-lxd-mode']], ['1000', '1000', '0604']);
  t.is((await remove(RUNNING, '/home/user/made')).status, 200);
  t.not((await lxc(d.socket, 'exec', RUNNING, '--', 'test', '-e', '/home/user/made')).status, 0);
});

lxcTest('the lxc client: push, pull, recursive, mode, uid, delete', async (t) => {
  const work = mkdtempSync(path.join(tmpdir(), 'corral-files-lxc-'));
  try {
    const ok = (...args: string[]) => lxcOk(t, d.socket, ...args);
    writeFileSync(path.join(work, 'one.txt'), 'one\n');
    await ok('file', 'push', path.join(work, 'one.txt'), `${RUNNING}/root/one.txt`, '--mode', '0604', '--uid', '7', '--gid', '8');
    const st = lstatSync(path.join(rootfs(RUNNING), 'root/one.txt'));
    t.deepEqual([st.uid, st.gid, st.mode & 0o7777], [7, 8, 0o604]);
    await ok('file', 'pull', `${RUNNING}/root/one.txt`, path.join(work, 'back.txt'));
    t.is(readFileSync(path.join(work, 'back.txt'), 'utf8'), 'one\n');
    mkdirSync(path.join(work, 'tree/sub'), { recursive: true });
    writeFileSync(path.join(work, 'tree/sub/a.txt'), 'A');
    symlinkSync('sub/a.txt', path.join(work, 'tree/ln'));
    await ok('file', 'push', '-r', path.join(work, 'tree'), `${RUNNING}/srv/`);
    t.is(readFileSync(path.join(rootfs(RUNNING), 'srv/tree/sub/a.txt'), 'utf8'), 'A');
    t.is(readlinkSync(path.join(rootfs(RUNNING), 'srv/tree/ln')), 'sub/a.txt');
    mkdirSync(path.join(work, 'pulled'));
    await ok('file', 'pull', '-r', `${RUNNING}/srv/tree`, path.join(work, 'pulled'));
    t.is(readFileSync(path.join(work, 'pulled/tree/sub/a.txt'), 'utf8'), 'A');
    t.is(readlinkSync(path.join(work, 'pulled/tree/ln')), 'sub/a.txt');
    await ok('file', 'delete', `${RUNNING}/root/one.txt`);
    t.false(existsSync(path.join(rootfs(RUNNING), 'root/one.txt')));
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});

test.serial('bad input gets the right status and changes nothing', async (t) => {
  for (const method of ['GET', 'POST', 'DELETE']) {
    for (const q of ['', '?path=']) {
      const res = await d.request(method, `/1.0/instances/${STOPPED}/files${q}`, method === 'POST' ? Buffer.from('x') : undefined,
        { 'content-type': 'application/octet-stream' });
      t.is(res.status, 400, `${method} ${q}`);
      t.regex(res.json.error, /Missing path/);
    }
    t.is((await d.request(method, url('no-such', '/etc/passwd'))).status, 404, `${method} on a missing instance`);
  }
  const badHeaders: Record<string, string>[] = [
    { 'X-LXD-mode': 'abc' }, { 'X-LXD-mode': '99999' }, { 'X-LXD-mode': '0o9' }, { 'X-LXD-mode': '0x1a4' },
    { 'X-LXD-uid': 'x' }, { 'X-LXD-uid': '-5' }, { 'X-LXD-uid': '99999999999' }, { 'X-LXD-gid': '1.5' },
    { 'X-LXD-type': 'weird' }, { 'X-LXD-write': 'sideways' },
  ];
  for (const headers of badHeaders) {
    const res = await push(STOPPED, '/root/bad.txt', 'x', headers);
    t.is(res.status, 400, JSON.stringify(headers));
    t.is(res.json.type, 'error');
  }
  t.false(existsSync(path.join(rootfs(STOPPED), 'root/bad.txt')));
  t.regex((await push(STOPPED, '/root/bad.txt', 'x', { 'X-LXD-type': 'weird' })).json.error, /Bad file type: weird/);

  t.is((await push(STOPPED, '/root', 'x')).status, 400, 'a file over a directory');
  t.is((await push(STOPPED, '/', 'x')).status, 400);
  t.is((await remove(STOPPED, '/')).status, 400, 'the root cannot go');
  t.is((await remove(STOPPED, '/root/..')).status, 400);
  t.true(existsSync(path.join(rootfs(STOPPED), 'root')));
  t.is((await push(STOPPED, '/root/empty-link', '', { 'X-LXD-type': 'symlink' })).status, 400);
  t.is((await push(STOPPED, '/etc/passwd', '', { 'X-LXD-type': 'directory' })).status, 409, 'a directory over a file');
  t.is((await pull(STOPPED, `/root/${'n'.repeat(300)}`)).status, 400);
  // A fifo is refused at once, never opened (that would block).
  spawnSync('mkfifo', [path.join(rootfs(STOPPED), 'root/fifo')]);
  t.is((await pull(STOPPED, '/root/fifo')).status, 400);
  // Link loops.
  symlinkSync('loop2', path.join(rootfs(STOPPED), 'root/loop1'));
  symlinkSync('loop1', path.join(rootfs(STOPPED), 'root/loop2'));
  const loop = await pull(STOPPED, '/root/loop1/x');
  t.is(loop.status, 400);
  t.regex(loop.json.error, /symbolic links/);
  t.is((await push(STOPPED, '/root/loop1', 'x')).status, 400);
  t.is((await pull(STOPPED, '/root/loop1')).headers['x-lxd-type'], 'symlink', 'a final link is not followed on read');
});

test.serial('an interrupted upload leaves the old file whole and no temp file', async (t) => {
  const file = path.join(rootfs(STOPPED), 'root/keep.txt');
  writeFileSync(file, 'original\n');
  await new Promise<void>((resolve) => {
    const req = http.request({
      socketPath: d.socket, method: 'POST', path: url(STOPPED, '/root/keep.txt'),
      headers: { 'content-type': 'application/octet-stream', 'content-length': '1000000' },
    });
    req.on('error', () => resolve());
    req.on('response', () => resolve());
    req.write(Buffer.alloc(100000, 0x41), () => setTimeout(() => req.destroy(), 200));
  });
  await new Promise((r) => setTimeout(r, 500));
  t.is(readFileSync(file, 'utf8'), 'original\n');
  t.false(readdirSync(path.dirname(file)).some((n) => n.startsWith('.corral-upload')));
  t.is((await pull(STOPPED, '/root/keep.txt')).body, 'original\n', 'and the daemon still serves');
});

test.serial('escape: ".." sequences stay at the container root', async (t) => {
  const m = mirror(STOPPED);
  try {
    for (const p of [`/../../../../..${sentinelFile}`, `../../..${sentinelFile}`, `/root/../../../etc/../..${sentinelFile}`]) {
      const got = await pull(STOPPED, p);
      t.is(got.status, 200, p);
      t.is(got.body, 'CONTAINER COPY\n', `${p} resolves inside the container`);
    }
    t.is((await push(STOPPED, `/../../..${sentinelFile}`, 'pwned', { 'X-LXD-uid': '4242', 'X-LXD-gid': '4242', 'X-LXD-mode': '0666' })).status, 200);
    t.is(readFileSync(m.secret, 'utf8'), 'pwned');
    t.is(lstatSync(m.secret).uid, 0, 'the existing file keeps its owner, as in the reference');
    t.is((await push(STOPPED, `/../../..${sentinelDir}/new.txt`, 'new')).status, 200);
    t.true(existsSync(path.join(m.dir, 'new.txt')));
    t.is((await push(STOPPED, `/../..${sentinelDir}/newdir`, '', { 'X-LXD-type': 'directory' })).status, 200);
    t.is((await push(STOPPED, `/../..${sentinelDir}/newlink`, '/x', { 'X-LXD-type': 'symlink' })).status, 200);
    t.is((await remove(STOPPED, `/../../..${victimFile}`)).status, 200);
    t.false(existsSync(m.victim));
    assertHostUntouched(t);
    dropMirror(STOPPED);
    // Without the copy inside, the host path is simply not there.
    t.is((await pull(STOPPED, `/../../../..${sentinelFile}`)).status, 404);
    t.is((await push(STOPPED, `/../../../..${sentinelFile}`, 'pwned')).status, 404);
    t.is((await remove(STOPPED, `/../../../..${victimFile}`)).status, 404);
    assertHostUntouched(t);
  } finally {
    dropMirror(STOPPED);
  }
});

/** Plant links in the rootfs, then try to read, write, chown and delete through them. */
async function throughParentLink(t: ExecutionContext, linkTarget: string) {
  const root = rootfs(STOPPED);
  const link = path.join(root, 'root/evil');
  rmSync(link, { force: true });
  symlinkSync(linkTarget, link);
  try {
    // Nothing inside at the host path: every operation misses.
    t.is((await pull(STOPPED, '/root/evil/secret.txt')).status, 404);
    t.is((await pull(STOPPED, '/root/evil')).body, linkTarget, 'the link itself is what a read of it gives');
    t.is((await push(STOPPED, '/root/evil/secret.txt', 'pwned', { 'X-LXD-uid': '4242', 'X-LXD-mode': '0666' })).status, 404);
    t.is((await push(STOPPED, '/root/evil/new.txt', 'new')).status, 404);
    t.is((await push(STOPPED, '/root/evil/newlink', '/x', { 'X-LXD-type': 'symlink' })).status, 404);
    t.is((await remove(STOPPED, '/root/evil/victim')).status, 404);
    t.is((await remove(STOPPED, '/root/evil/secret.txt')).status, 404);
    assertHostUntouched(t);
    // Making directories through it creates them inside the container only.
    t.is((await push(STOPPED, '/root/evil/made/deeper', '', { 'X-LXD-type': 'directory' })).status, 200);
    t.true(statSync(path.join(root, sentinelDir, 'made/deeper')).isDirectory());
    t.false(existsSync(path.join(sentinelDir, 'made')));
    dropMirror(STOPPED);
    // With the same path inside the container, that is where everything lands.
    const m = mirror(STOPPED);
    t.is((await pull(STOPPED, '/root/evil/secret.txt')).body, 'CONTAINER COPY\n');
    t.is((await push(STOPPED, '/root/evil/secret.txt', 'pwned', { 'X-LXD-uid': '4242', 'X-LXD-gid': '4242', 'X-LXD-mode': '0666' })).status, 200);
    t.is(readFileSync(m.secret, 'utf8'), 'pwned');
    t.is(lstatSync(m.secret).uid, 0, 'the existing file keeps its owner, as in the reference');
    t.is((await push(STOPPED, '/root/evil/victim', 'appended', { 'X-LXD-write': 'append' })).status, 200);
    t.is(readFileSync(m.victim, 'utf8'), 'container victim\nappended');
    t.is((await remove(STOPPED, '/root/evil/victim')).status, 200);
    t.false(existsSync(m.victim));
    assertHostUntouched(t);
  } finally {
    rmSync(link, { force: true });
    dropMirror(STOPPED);
  }
}

test.serial('escape: an absolute symlink resolves inside the container', async (t) => {
  await throughParentLink(t, sentinelDir);
});

test.serial('escape: a relative symlink climbing out stops at the container root', async (t) => {
  await throughParentLink(t, climb(sentinelDir));
});

test.serial('escape: chains of symlinked parent directories', async (t) => {
  const root = rootfs(STOPPED);
  // /root/hop1 -> /root/hop2 (absolute) -> relative climb -> host dir; and a link to "/" then the host path.
  symlinkSync('/root/hop2', path.join(root, 'root/hop1'));
  symlinkSync(climb(sentinelDir), path.join(root, 'root/hop2'));
  symlinkSync('/', path.join(root, 'root/slash'));
  try {
    for (const p of ['/root/hop1', `/root/slash${sentinelDir}`, `/root/slash/..${sentinelDir}`]) {
      t.is((await pull(STOPPED, `${p}/secret.txt`)).status, 404, p);
      t.is((await push(STOPPED, `${p}/secret.txt`, 'pwned', { 'X-LXD-uid': '4242', 'X-LXD-mode': '0666' })).status, 404, p);
      t.is((await push(STOPPED, `${p}/new`, 'x')).status, 404, p);
      t.is((await remove(STOPPED, `${p}/victim`)).status, 404, p);
    }
    assertHostUntouched(t);
    const m = mirror(STOPPED);
    t.is((await pull(STOPPED, '/root/hop1/secret.txt')).body, 'CONTAINER COPY\n');
    t.is((await remove(STOPPED, '/root/hop1/victim')).status, 200);
    t.false(existsSync(m.victim));
    assertHostUntouched(t);
  } finally {
    for (const n of ['hop1', 'hop2', 'slash']) rmSync(path.join(root, 'root', n), { force: true });
    dropMirror(STOPPED);
  }
});

test.serial('escape: a symlink as the final component', async (t) => {
  const root = rootfs(STOPPED);
  const abs = path.join(root, 'root/fin-abs');
  const rel = path.join(root, 'root/fin-rel');
  symlinkSync(sentinelFile, abs);
  symlinkSync(climb(sentinelFile), rel);
  try {
    // Reads give the link, never the file behind it.
    for (const [p, target] of [['/root/fin-abs', sentinelFile], ['/root/fin-rel', climb(sentinelFile)]]) {
      const got = await pull(STOPPED, p);
      t.is(got.headers['x-lxd-type'], 'symlink');
      t.is(got.body, target);
      t.false(got.body.includes('HOST SECRET'));
    }
    // Writes follow the link inside the container: its target's parent does not exist there.
    t.is((await push(STOPPED, '/root/fin-abs', 'pwned', { 'X-LXD-uid': '4242', 'X-LXD-mode': '0666' })).status, 404);
    t.is((await push(STOPPED, '/root/fin-rel', 'pwned', { 'X-LXD-write': 'append' })).status, 404);
    t.is((await push(STOPPED, '/root/fin-abs', '', { 'X-LXD-type': 'directory' })).status, 409, 'mkdir over a dangling link');
    assertHostUntouched(t);
    const m = mirror(STOPPED);
    t.is((await push(STOPPED, '/root/fin-rel', 'through', { 'X-LXD-uid': '4242', 'X-LXD-mode': '0606' })).status, 200);
    t.is(readFileSync(m.secret, 'utf8'), 'through');
    t.deepEqual([lstatSync(m.secret).uid, lstatSync(m.secret).mode & 0o7777], [0, 0o644], 'the existing file keeps its owner and mode, as in the reference');
    t.true(lstatSync(rel).isSymbolicLink(), 'the link stays a link');
    // Deleting removes the links, not what they point to.
    t.is((await remove(STOPPED, '/root/fin-abs')).status, 200);
    t.is((await remove(STOPPED, '/root/fin-rel')).status, 200);
    t.false(existsSync(abs) || existsSync(rel));
    t.true(existsSync(m.secret));
    assertHostUntouched(t);
  } finally {
    rmSync(abs, { force: true });
    rmSync(rel, { force: true });
    dropMirror(STOPPED);
  }
});

test.serial('escape: a directory swapped for a symlink during requests', async (t) => {
  const root = rootfs(STOPPED);
  const base = path.join(root, 'root/race');
  mkdirSync(path.join(base, 'real'), { recursive: true });
  writeFileSync(path.join(base, 'real/secret.txt'), 'inside\n');
  symlinkSync(sentinelDir, path.join(base, 'abs'));
  symlinkSync(climb(sentinelDir), path.join(base, 'rel'));
  // A separate process flips root/race/d between the real directory and the two links as fast as
  // it can, for as long as requests run, and reports how often each link was in place.
  const swapper = spawn(process.execPath, ['-e', `
    const fs = require('fs'); const b = ${JSON.stringify(base)}; const d = b + '/d';
    const end = Date.now() + 4500; const placed = { real: 0, abs: 0, rel: 0 };
    const flip = (from) => {
      // A request may have made d a plain directory (mkdir with parents): clear it and go on.
      try { fs.renameSync(b + '/' + from, d); placed[from]++; } catch { try { fs.rmSync(d, { recursive: true, force: true }); } catch {} return; }
      try { fs.renameSync(d, b + '/' + from); } catch {}
    };
    while (Date.now() < end) { flip('real'); flip('abs'); flip('real'); flip('rel'); }
    process.stdout.write(JSON.stringify(placed));
  `], { stdio: ['ignore', 'pipe', 'inherit'] });
  let report = '';
  swapper.stdout!.on('data', (c: Buffer) => (report += c));
  const exited = new Promise<void>((resolve) => swapper.once('close', () => resolve()));
  const statuses = new Map<number, number>();
  const bodies: string[] = [];
  try {
    const deadline = Date.now() + 4000;
    let i = 0;
    while (Date.now() < deadline) {
      const n = i++;
      const results = await Promise.all([
        pull(STOPPED, '/root/race/d/secret.txt'),
        pull(STOPPED, '/root/race/d'),
        push(STOPPED, '/root/race/d/secret.txt', `w${n}`, { 'X-LXD-uid': '4242', 'X-LXD-gid': '4242', 'X-LXD-mode': '0666' }),
        push(STOPPED, '/root/race/d/victim', 'a', { 'X-LXD-write': 'append', 'X-LXD-mode': '0666' }),
        push(STOPPED, `/root/race/d/new-${n}`, 'n'),
        push(STOPPED, `/root/race/d/dir-${n}`, '', { 'X-LXD-type': 'directory' }),
        push(STOPPED, `/root/race/d/link-${n}`, '/x', { 'X-LXD-type': 'symlink' }),
        remove(STOPPED, '/root/race/d/victim'),
        remove(STOPPED, `/root/race/d/new-${n - 1}`),
      ]);
      for (const r of results) {
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        bodies.push(r.body);
        if (r.status >= 500) t.log(r.status, r.body);
      }
    }
  } finally {
    await exited;
  }
  const placed = JSON.parse(report);
  t.log('links in place', placed);
  t.true(placed.abs > 100 && placed.rel > 100, 'the swap really happened, often');
  t.log('statuses', Object.fromEntries(statuses));
  t.true((statuses.get(200) ?? 0) > 0, 'requests got through the real directory');
  t.false(statuses.has(500), 'no server errors');
  t.false(bodies.some((b) => b.includes('HOST SECRET') || b.includes('victim\n')), 'no host content was served');
  assertHostUntouched(t);
  rmSync(base, { recursive: true, force: true });
  dropMirror(STOPPED);
});
