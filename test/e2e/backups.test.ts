/** Instance backups through the real `lxc` client (Debian lxd-client 5.0.2): export, import, their options. */
import test, { type ExecutionContext } from 'ava';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startWithPool, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { lxc, lxcOk } from '../helpers/clients.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';

let d: Daemon;
let image: BusyboxImage;
let work: string;

const ok = (t: ExecutionContext, ...args: string[]) => lxcOk(t, d.socket, ...args);

const members = (file: string) => execFileSync('tar', ['-t', '-f', file], { encoding: 'utf8', maxBuffer: 64 << 20 }).split('\n').filter(Boolean);
const head = (file: string, n: number) => readFileSync(file).subarray(0, n);

test.before(async () => {
  image = buildBusyboxImage('gzip');
  work = mkdtempSync(path.join(tmpdir(), 'corral-e2e-backups-'));
  d = await startWithPool();
  const imported = await lxc(d.socket, 'image', 'import', image.unified, '--alias', 'bb');
  if (imported.status !== 0) throw new Error(`image import failed: ${imported.stderr}`);
});

test.after.always(async () => {
  await stopDaemons();
  rmSync(image.dir, { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
});

test.serial('lxc export and lxc import round trip, with snapshots, --instance-only, --compression and a new name', async (t) => {
  await ok(t, 'init', 'bb', 'c');
  const note = path.join(work, 'note.txt');
  writeFileSync(note, 'first\n');
  await ok(t, 'file', 'push', note, 'c/root/note.txt');
  await ok(t, 'snapshot', 'c', 's0');
  writeFileSync(note, 'second\n');
  await ok(t, 'file', 'push', note, 'c/root/note.txt');

  const full = path.join(work, 'c.tar.gz');
  await ok(t, 'export', 'c', full);
  t.true(head(full, 2).equals(Buffer.from([0x1f, 0x8b])), 'gzip by default');
  const names = members(full);
  t.is(names[0], 'backup/index.yaml');
  t.true(names.includes('backup/snapshots/s0/rootfs/root/note.txt'));
  t.true(names.includes('backup/container/rootfs/root/note.txt'));
  t.deepEqual(JSON.parse(await ok(t, 'query', '/1.0/instances/c/backups')), [], 'lxc removes the backup it downloaded');

  const only = path.join(work, 'c-only.tar.xz');
  await ok(t, 'export', 'c', only, '--instance-only', '--compression', 'xz');
  t.true(head(only, 6).equals(Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00])), 'xz as asked');
  t.false(members(only).some((n) => n.startsWith('backup/snapshots')), 'no snapshots with --instance-only');

  const plain = path.join(work, 'c.tar');
  await ok(t, 'export', 'c', plain, '--compression', 'none');
  t.is(head(plain, 262).subarray(257).toString('latin1'), 'ustar');

  const taken = await lxc(d.socket, 'import', full);
  t.not(taken.status, 0, 'the name c is taken');
  t.regex(taken.stderr, /already exists/);

  await ok(t, 'import', full, 'c2');
  const info = await ok(t, 'info', 'c2');
  t.regex(info, /s0/, 'the snapshot came along');
  const pulled = path.join(work, 'pulled.txt');
  await ok(t, 'file', 'pull', 'c2/root/note.txt', pulled);
  t.is(readFileSync(pulled, 'utf8'), 'second\n');

  await ok(t, 'import', only, 'c3', '--storage', 'default');
  t.notRegex(await ok(t, 'info', 'c3'), /Snapshots:/);
  await ok(t, 'start', 'c3');
  t.is((await ok(t, 'exec', 'c3', '--', 'cat', '/root/note.txt')).trim(), 'second');
  await ok(t, 'stop', 'c3', '--force');

  const badPool = await lxc(d.socket, 'import', plain, 'c4', '--storage', 'nopool');
  t.not(badPool.status, 0);
  t.regex(badPool.stderr, /nopool/);
  t.regex(await ok(t, 'list', '--format', 'csv', '-c', 'n'), /^c\nc2\nc3\n?$/);

  const junk = path.join(work, 'junk.tar.gz');
  writeFileSync(junk, Buffer.from('not a backup'));
  const refused = await lxc(d.socket, 'import', junk, 'c5');
  t.not(refused.status, 0);
  t.regex(refused.stderr, /Invalid backup/);
  t.false(existsSync(path.join(d.dir, 'storage-pools', 'default', 'containers', 'c5')));

  for (const name of ['c', 'c2', 'c3']) await ok(t, 'delete', name);
});
