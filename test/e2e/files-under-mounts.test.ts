/**
 * The file API sees the container's disk mounts (issue 14, item 4): `lxc file push/pull/edit/
 * delete`, recursive too, on paths under custom volumes and host directories attached as disks,
 * nested mounts, read-only disks, and links that cross a mount, with the instance running or
 * stopped. Resolution never leaves the root filesystem or the mounted source.
 */
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startWithPool, stopDaemons, killContainers, type Daemon } from '../helpers/daemon.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { importImage } from '../helpers/api.js';
import { lxc, lxcEnv, lxcOk } from '../helpers/clients.js';

const require = createRequire(import.meta.url);
let d: Daemon;
let image: BusyboxImage;
let work: string;

const run = (t: any, ...args: string[]) => lxcOk(t, d.socket, ...args);
const volumeDir = (name: string) => path.join(d.dir, 'storage-pools', 'default', 'custom', `default_${name}`);
const rootfs = (name: string) => path.join(d.dir, 'storage-pools', 'default', 'containers', name, 'rootfs');
const local = (name: string, text: string) => {
  const file = path.join(work, name);
  writeFileSync(file, text);
  return file;
};

test.before(async () => {
  image = buildBusyboxImage('gzip');
  work = mkdtempSync(path.join(tmpdir(), 'corral-e2e-mounts-'));
  // Host directories shared with unprivileged containers must be reachable by their (unmapped) root.
  chmodSync(work, 0o755);
  d = await startWithPool();
  await importImage(d, image.unified, 'bb');
});

test.after.always(async () => {
  killContainers(d?.dir);
  await stopDaemons();
  rmSync(image.dir, { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
});

test.serial('a running container: push, pull, edit and delete under a custom volume, nested volumes, read-only disks and a busy mount point', async (t) => {
  t.timeout(240_000);
  await run(t, 'storage', 'volume', 'create', 'default', 'data');
  await run(t, 'storage', 'volume', 'create', 'default', 'inner');
  await run(t, 'launch', 'bb', 'c1');
  await run(t, 'config', 'device', 'add', 'c1', 'data', 'disk', 'pool=default', 'source=data', 'path=/mnt');
  await run(t, 'config', 'device', 'add', 'c1', 'inner', 'disk', 'pool=default', 'source=inner', 'path=/mnt/sub/deep');
  await run(t, 'config', 'device', 'add', 'c1', 'ro', 'disk', 'pool=default', 'source=data', 'path=/ro', 'readonly=true');

  await run(t, 'file', 'push', local('f', 'on the volume\n'), 'c1/mnt/testfile');
  t.is(await run(t, 'exec', 'c1', '--', 'cat', '/mnt/testfile'), 'on the volume\n', 'the container sees the pushed file');
  t.is(readFileSync(path.join(volumeDir('data'), 'testfile'), 'utf8'), 'on the volume\n', 'it is in the volume');
  t.false(existsSync(path.join(rootfs('c1'), 'mnt', 'testfile')), 'nothing under the mount point in the root filesystem');

  // Nested: the inner volume hides that path of the outer one.
  await run(t, 'file', 'push', local('g', 'deep\n'), 'c1/mnt/sub/deep/inner.txt');
  t.is(await run(t, 'exec', 'c1', '--', 'cat', '/mnt/sub/deep/inner.txt'), 'deep\n');
  t.true(existsSync(path.join(volumeDir('inner'), 'inner.txt')));
  t.false(existsSync(path.join(volumeDir('data'), 'sub', 'deep', 'inner.txt')));

  // Recursive push and pull across both volumes.
  const tree = path.join(work, 'tree');
  mkdirSync(path.join(tree, 'a'), { recursive: true });
  writeFileSync(path.join(tree, 'a', 'one.txt'), '1');
  await run(t, 'file', 'push', '-r', tree, 'c1/mnt/sub/deep/');
  t.is(readFileSync(path.join(volumeDir('inner'), 'tree', 'a', 'one.txt'), 'utf8'), '1');
  const back = path.join(work, 'back');
  mkdirSync(back);
  await run(t, 'file', 'pull', '-r', 'c1/mnt/sub', back);
  t.is(readFileSync(path.join(back, 'sub', 'deep', 'tree', 'a', 'one.txt'), 'utf8'), '1');
  t.is(readFileSync(path.join(back, 'sub', 'deep', 'inner.txt'), 'utf8'), 'deep\n');

  // lxc file edit: $EDITOR on a pulled copy, pushed back to the volume.
  const editor = local('editor.sh', '#!/bin/sh\necho edited > "$1"\n');
  chmodSync(editor, 0o755);
  const pty = require('node-pty');
  const term = pty.spawn('lxc', ['file', 'edit', 'c1/mnt/testfile'], { cols: 80, rows: 24, env: { ...lxcEnv(d.socket), EDITOR: editor, VISUAL: editor } });
  t.is(await new Promise<number>((resolve) => term.onExit((e: { exitCode: number }) => resolve(e.exitCode))), 0);
  t.is(await run(t, 'exec', 'c1', '--', 'cat', '/mnt/testfile'), 'edited\n');

  // Read-only: refused as the container's kernel refuses it, and nothing is written.
  const refused = await lxc(d.socket, 'file', 'push', local('h', 'no\n'), 'c1/ro/nope');
  t.not(refused.status, 0);
  t.regex(refused.stderr, /read-only file system/i);
  t.false(existsSync(path.join(volumeDir('data'), 'nope')));
  t.not((await lxc(d.socket, 'file', 'delete', 'c1/ro/testfile')).status, 0, 'no delete through a read-only disk');
  t.true(existsSync(path.join(volumeDir('data'), 'testfile')));
  t.is(await run(t, 'file', 'pull', 'c1/ro/testfile', '-'), 'edited\n', 'reading a read-only disk works');

  // Delete under the mount; the mount point itself is busy.
  await run(t, 'file', 'delete', 'c1/mnt/testfile');
  t.false(existsSync(path.join(volumeDir('data'), 'testfile')));
  t.not((await lxc(d.socket, 'exec', 'c1', '--', 'test', '-e', '/mnt/testfile')).status, 0);
  const busy = await lxc(d.socket, 'file', 'delete', 'c1/mnt/sub/deep');
  t.not(busy.status, 0);
  t.regex(busy.stderr, /busy/i);

  // A backup of the volume holds what was pushed.
  await run(t, 'file', 'push', local('k', 'kept\n'), 'c1/mnt/kept.txt');
  const tarball = path.join(work, 'data.tar.gz');
  await run(t, 'storage', 'volume', 'export', 'default', 'data', tarball);
  const listing = spawnSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).stdout;
  t.regex(listing, /kept\.txt/);
});

test.serial('links across mounts, ".." out of a mount, and no way out of the volume or the root filesystem', async (t) => {
  // A link in the root filesystem into the volume, and one in the volume back to the root filesystem.
  await run(t, 'exec', 'c1', '--', 'ln', '-s', '/mnt/sub', '/linked');
  await run(t, 'exec', 'c1', '--', 'ln', '-s', '/etc', '/mnt/etc-link');
  await run(t, 'file', 'push', local('l', 'through a link\n'), 'c1/linked/via-link.txt');
  t.is(readFileSync(path.join(volumeDir('data'), 'sub', 'via-link.txt'), 'utf8'), 'through a link\n');
  t.regex(await run(t, 'file', 'pull', 'c1/mnt/etc-link/passwd', '-'), /^user:x:1000/m, 'the container\'s /etc, not the volume\'s');
  t.regex(await run(t, 'file', 'pull', 'c1/mnt/sub/../../etc/passwd', '-'), /^user:x:1000/m, '".." climbs out of the mount into the container');

  // Links planted on the host side of the volume still resolve inside the container's tree.
  symlinkSync('../../../../../../../../../../etc', path.join(volumeDir('data'), 'escape'));
  symlinkSync('/', path.join(volumeDir('data'), 'slash'));
  for (const p of ['c1/mnt/escape/passwd', 'c1/mnt/slash/etc/passwd', 'c1/mnt/../../../../etc/passwd']) {
    const text = await run(t, 'file', 'pull', p, '-');
    t.regex(text, /^user:x:1000/m, p);
    t.notRegex(text, /^daemon:/m, `${p}: never the host's /etc/passwd`);
  }
  const out = await lxc(d.socket, 'file', 'push', local('m', 'x'), 'c1/mnt/escape/corral-h14-escape');
  t.is(out.status, 0, out.stderr);
  t.false(existsSync('/etc/corral-h14-escape'), 'the write stayed in the container');
  t.true(existsSync(path.join(rootfs('c1'), 'etc', 'corral-h14-escape')));
});

test.serial('a stopped container: writes land in the volume the container will mount; read-only still refused', async (t) => {
  t.timeout(180_000);
  await run(t, 'stop', 'c1', '--force');
  await run(t, 'file', 'push', local('s', 'while stopped\n'), 'c1/mnt/stopped.txt');
  t.is(readFileSync(path.join(volumeDir('data'), 'stopped.txt'), 'utf8'), 'while stopped\n');
  t.false(existsSync(path.join(rootfs('c1'), 'mnt', 'stopped.txt')));
  await run(t, 'file', 'push', '-p', local('p', 'parents\n'), 'c1/mnt/sub/deep/new/dir/p.txt');
  t.true(existsSync(path.join(volumeDir('inner'), 'new', 'dir', 'p.txt')));
  t.not((await lxc(d.socket, 'file', 'push', local('r', 'no\n'), 'c1/ro/stopped-ro')).status, 0);
  t.false(existsSync(path.join(volumeDir('data'), 'stopped-ro')));
  await run(t, 'start', 'c1');
  t.is(await run(t, 'exec', 'c1', '--', 'cat', '/mnt/stopped.txt', '/mnt/sub/deep/new/dir/p.txt'), 'while stopped\nparents\n');

  // Never started: the image has no /mnt, yet the container will, with the volume in it.
  await run(t, 'init', 'bb', 'fresh');
  t.false(existsSync(path.join(rootfs('fresh'), 'mnt')));
  await run(t, 'config', 'device', 'add', 'fresh', 'data', 'disk', 'pool=default', 'source=data', 'path=/mnt');
  const listing = await d.request('GET', '/1.0/instances/fresh/files?path=/');
  t.true(listing.json.metadata.includes('mnt'), 'the mount point is listed');
  t.regex(await run(t, 'file', 'pull', 'fresh/mnt/stopped.txt', '-'), /while stopped/);
  await run(t, 'file', 'push', local('fr', 'fresh\n'), 'fresh/mnt/fresh.txt');
  t.true(existsSync(path.join(volumeDir('data'), 'fresh.txt')));
  await run(t, 'start', 'fresh');
  t.is(await run(t, 'exec', 'fresh', '--', 'cat', '/mnt/fresh.txt'), 'fresh\n');
  await run(t, 'delete', '--force', 'fresh');
});

test.serial('a host directory without shift: ids go through the instance\'s id map both ways', async (t) => {
  const host = path.join(work, 'hostdir');
  mkdirSync(host);
  chmodSync(host, 0o777);
  await run(t, 'config', 'device', 'add', 'c1', 'hostdir', 'disk', `source=${host}`, 'path=/host');
  await run(t, 'file', 'push', local('o', 'owned\n'), 'c1/host/owned.txt', '--uid', '5', '--gid', '6');
  await run(t, 'file', 'push', local('o2', 'root\n'), 'c1/host/root.txt');
  const map = JSON.parse((await run(t, 'config', 'get', 'c1', 'volatile.idmap.current')).trim() || '[]') as { Isuid: boolean; Hostid: number; Nsid: number }[];
  const base = map.find((e) => e.Isuid && e.Nsid === 0)?.Hostid ?? 0;
  const st = statSync(path.join(host, 'owned.txt'));
  t.deepEqual([st.uid, st.gid], [base + 5, base + 6], 'stored as host ids');
  t.is(statSync(path.join(host, 'root.txt')).uid, base);
  t.is((await run(t, 'exec', 'c1', '--', 'stat', '-c', '%u %g', '/host/owned.txt', '/host/root.txt')).trim(), '5 6\n0 0');
  const headers = await d.request('GET', '/1.0/instances/c1/files?path=/host/owned.txt');
  t.is(headers.headers['x-lxd-uid'], '5');
  t.is(headers.headers['x-lxd-gid'], '6');
});

test.serial('a disk mounting a single file: written in place, never removed; an existing file keeps its owner and mode', async (t) => {
  const file = path.join(work, 'hostfile');
  writeFileSync(file, 'original\n');
  chmodSync(file, 0o666);
  const inode = statSync(file).ino;
  await run(t, 'config', 'device', 'add', 'c1', 'hostfile', 'disk', `source=${file}`, 'path=/etc/hostfile');
  await run(t, 'config', 'device', 'add', 'c1', 'hostfile-ro', 'disk', `source=${file}`, 'path=/etc/hostfile-ro', 'readonly=true');
  t.is(await run(t, 'file', 'pull', 'c1/etc/hostfile', '-'), 'original\n');
  await run(t, 'file', 'push', local('n', 'new\n'), 'c1/etc/hostfile');
  t.is(readFileSync(file, 'utf8'), 'new\n');
  t.is(statSync(file).ino, inode, 'the same file, written in place: the mount still shows it');
  t.is(statSync(file).mode & 0o777, 0o666, 'its mode is kept');
  t.is(await run(t, 'exec', 'c1', '--', 'cat', '/etc/hostfile'), 'new\n');
  const busy = await lxc(d.socket, 'file', 'delete', 'c1/etc/hostfile');
  t.not(busy.status, 0);
  t.regex(busy.stderr, /busy/i);
  t.true(existsSync(file));
  t.regex((await lxc(d.socket, 'file', 'push', local('n2', 'x'), 'c1/etc/hostfile/below')).stderr, /not a directory/i);
  t.regex((await lxc(d.socket, 'file', 'push', local('n3', 'x'), 'c1/etc/hostfile-ro')).stderr, /read-only file system/i);
  t.is(readFileSync(file, 'utf8'), 'new\n');
  const at = '/1.0/instances/c1/files?path=/etc/hostfile';
  t.is((await d.request('POST', at, '', { 'X-LXD-type': 'directory' })).status, 409, 'no directory over the mounted file');
  t.is((await d.request('POST', at, 'elsewhere', { 'X-LXD-type': 'symlink' })).status, 409, 'no link over the mounted file');
  t.true(statSync(file).isFile());

  // lxc file push always sends the local file's owner and mode; the reference keeps an existing file's.
  await run(t, 'exec', 'c1', '--', 'sh', '-c', 'echo x > /etc/existing && chmod 600 /etc/existing && chown 7:7 /etc/existing');
  await run(t, 'file', 'push', local('e', 'pushed\n'), 'c1/etc/existing');
  t.is((await run(t, 'exec', 'c1', '--', 'stat', '-c', '%u %g %a', '/etc/existing')).trim(), '7 7 600');
  await run(t, 'file', 'push', local('e2', 'again\n'), 'c1/etc/existing', '--uid', '5', '--mode', '0644');
  t.is((await run(t, 'exec', 'c1', '--', 'stat', '-c', '%u %g %a', '/etc/existing')).trim(), '7 7 600', 'even when asked explicitly');
  t.is(await run(t, 'exec', 'c1', '--', 'cat', '/etc/existing'), 'again\n');
});
