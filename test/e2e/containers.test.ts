/** The container life cycle through the real `lxc` client against corral: images, launch, exec, files, config, power. */
import test from 'ava';
import { createRequire } from 'node:module';
import { chmodSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { stopDaemons, waitFor, type Daemon, startWithPool } from '../helpers/daemon.js';
import { lxc, lxcOk, lxcEnv, lxcWithInput } from '../helpers/clients.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { assertEndOfInput } from '../helpers/exec-input.js';

const require = createRequire(import.meta.url);
let d: Daemon;
let image: BusyboxImage;
let work: string;

const ok = (t: any, ...args: string[]) => lxcOk(t, d.socket, ...args);

test.before(async () => {
  image = buildBusyboxImage('gzip');
  work = mkdtempSync(path.join(tmpdir(), 'corral-e2e-'));
  // Host paths shared with unprivileged containers must be reachable by their (unmapped) root.
  chmodSync(work, 0o755);
  d = await startWithPool();
  const imported = await lxc(d.socket, 'image', 'import', image.unified, '--alias', 'bb');
  if (imported.status !== 0) throw new Error(`image import failed: ${imported.stderr}`);
});

test.after.always(async () => {
  const list = await lxc(d.socket, 'list', '--format', 'json').catch(() => undefined);
  for (const c of JSON.parse(list?.stdout || '[]')) await lxc(d.socket, 'delete', '--force', c.name);
  await stopDaemons();
  rmSync(image.dir, { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
});

test.serial('launch, list, info, exec with exit codes, user, group and cwd (container_exec_user_group_cwd), image properties (container_image_properties), stop and delete', async (t) => {
  await ok(t, 'launch', 'bb', 'c1');
  const list = JSON.parse(await ok(t, 'list', '--format', 'json'));
  const c1 = list.find((c: any) => c.name === 'c1');
  t.is(c1.status, 'Running');
  t.true(c1.state.pid > 0);
  t.is(c1.expanded_devices.root.pool, 'default');
  t.is(c1.config['image.os'], 'Busybox');
  const table = await ok(t, 'list');
  t.regex(table, /c1\s+\|\s+RUNNING/);
  t.regex(await ok(t, 'list', 'status=running', '--format', 'csv', '-c', 'n'), /^c1$/m);
  t.is((await ok(t, 'list', 'status=stopped', '--format', 'csv', '-c', 'n')).trim(), '');
  const info = await ok(t, 'info', 'c1');
  t.regex(info, /Status: RUNNING/);
  t.regex(info, /PID: \d+/);
  t.is((await ok(t, 'exec', 'c1', '--', 'cat', '/etc/hostname')).trim(), 'c1', 'the create template ran');
  const failing = await lxc(d.socket, 'exec', 'c1', '--', 'sh', '-c', 'echo out; echo err >&2; exit 3');
  t.is(failing.status, 3);
  t.is(failing.stdout.trim(), 'out');
  t.is(failing.stderr.trim(), 'err');
  t.is((await ok(t, 'exec', 'c1', '--env', 'FOO=bar', '--', 'sh', '-c', 'echo $FOO')).trim(), 'bar');
  t.is((await ok(t, 'exec', 'c1', '--user', '1000', '--group', '1000', '--cwd', '/tmp', '--', 'sh', '-c', 'id -u; pwd')).trim(), '1000\n/tmp');
  await ok(t, 'stop', 'c1', '--force');
  t.regex(await ok(t, 'info', 'c1'), /Status: STOPPED/);
  await ok(t, 'delete', 'c1');
  t.false((await ok(t, 'list', '--format', 'csv', '-c', 'n')).includes('c1'));
});

test.serial('interactive exec through a pty', async (t) => {
  await ok(t, 'launch', 'bb', 'c2');
  const pty = require('node-pty');
  const term = pty.spawn('lxc', ['exec', 'c2', '--', 'sh'], { cols: 100, rows: 30, env: lxcEnv(d.socket) });
  let out = '';
  term.onData((s: string) => (out += s));
  const exited = new Promise<number>((r) => term.onExit((e: { exitCode: number }) => r(e.exitCode)));
  await waitFor(() => out.includes('#'), 10000, 'the prompt');
  term.write('stty size; echo marker-$((6*7))\r');
  await waitFor(() => out.includes('marker-42'), 10000, 'the command output');
  t.regex(out, /30 100/);
  term.write('exit 5\r');
  t.is(await exited, 5);
});

test.serial('end of input reaches the command: echo x | lxc exec c2 -- cat, with -T and -t too', async (t) => {
  // More lines than a pipe holds.
  await assertEndOfInput(t, d.socket, 'c2', 20000);
});

test.serial('file push, pull, recursive, mode, uid, delete, edit', async (t) => {
  const local = path.join(work, 'hello.txt');
  writeFileSync(local, 'hello world\n');
  await ok(t, 'file', 'push', local, 'c2/root/hello.txt', '--mode', '0600', '--uid', '1000', '--gid', '1000');
  t.is((await ok(t, 'exec', 'c2', '--', 'stat', '-c', '%u %g %a', '/root/hello.txt')).trim(), '1000 1000 600');
  const pulled = path.join(work, 'pulled.txt');
  await ok(t, 'file', 'pull', 'c2/root/hello.txt', pulled);
  t.is(readFileSync(pulled, 'utf8'), 'hello world\n');
  const tree = path.join(work, 'tree');
  mkdirSync(path.join(tree, 'sub'), { recursive: true });
  writeFileSync(path.join(tree, 'sub', 'a.txt'), 'A');
  await ok(t, 'file', 'push', '-r', tree, 'c2/opt/');
  t.is((await ok(t, 'exec', 'c2', '--', 'cat', '/opt/tree/sub/a.txt')), 'A');
  const back = path.join(work, 'back');
  mkdirSync(back);
  await ok(t, 'file', 'pull', '-r', 'c2/opt/tree', back);
  t.is(readFileSync(path.join(back, 'tree', 'sub', 'a.txt'), 'utf8'), 'A');
  await ok(t, 'file', 'delete', 'c2/root/hello.txt');
  t.not((await lxc(d.socket, 'exec', 'c2', '--', 'test', '-e', '/root/hello.txt')).status, 0);
  // lxc file edit runs $EDITOR on a pulled copy, then pushes it back; it needs a terminal.
  writeFileSync(path.join(work, 'motd'), 'original\n');
  await ok(t, 'file', 'push', path.join(work, 'motd'), 'c2/etc/motd', '--mode', '0640');
  const editor = path.join(work, 'editor.sh');
  writeFileSync(editor, '#!/bin/sh\necho edited > "$1"\n', { mode: 0o755 });
  const pty = require('node-pty');
  const term = pty.spawn('lxc', ['file', 'edit', 'c2/etc/motd'], { cols: 80, rows: 24, env: { ...lxcEnv(d.socket), EDITOR: editor, VISUAL: editor } });
  const edit = await new Promise<number>((resolve) => term.onExit((e: { exitCode: number }) => resolve(e.exitCode)));
  t.is(edit, 0);
  t.is((await ok(t, 'exec', 'c2', '--', 'stat', '-c', '%a', '/etc/motd')).trim(), '640', 'the mode is kept');
  t.is((await ok(t, 'exec', 'c2', '--', 'cat', '/etc/motd')).trim(), 'edited');
});

test.serial('config set/get/unset/show/edit, device add/remove, profiles', async (t) => {
  await ok(t, 'config', 'set', 'c2', 'user.note', 'kept');
  t.is((await ok(t, 'config', 'get', 'c2', 'user.note')).trim(), 'kept');
  t.regex(await ok(t, 'config', 'show', 'c2'), /user\.note: kept/);
  await ok(t, 'config', 'unset', 'c2', 'user.note');
  t.is((await ok(t, 'config', 'get', 'c2', 'user.note')).trim(), '');
  // lxc config edit reads the whole instance as YAML from stdin and PUTs it back.
  const shown = await ok(t, 'config', 'show', 'c2');
  const edited = await lxcWithInput(d.socket, shown.replace(/^config:\n/m, 'config:\n  user.edited: "yes"\n'), 'config', 'edit', 'c2');
  t.is(edited.status, 0, edited.stderr);
  t.is((await ok(t, 'config', 'get', 'c2', 'user.edited')).trim(), 'yes');
  const broken = await lxcWithInput(d.socket, shown.replace(/^config:\n/m, 'config:\n  bogus.key: "1"\n'), 'config', 'edit', 'c2');
  t.not(broken.status, 0);
  t.regex(broken.stderr, /bogus\.key/);
  const bad = await lxc(d.socket, 'config', 'set', 'c2', 'bogus.key', '1');
  t.not(bad.status, 0);
  t.regex(bad.stderr, /bogus\.key/);
  await ok(t, 'config', 'set', 'c2', 'limits.memory', '128MiB');
  t.is((await ok(t, 'config', 'get', 'c2', 'limits.memory')).trim(), '128MiB');

  const shared = path.join(work, 'shared');
  mkdirSync(shared);
  writeFileSync(path.join(shared, 'data'), 'from host');
  await ok(t, 'stop', 'c2', '--force');
  await ok(t, 'config', 'device', 'add', 'c2', 'data', 'disk', `source=${shared}`, 'path=/mnt/data', 'readonly=true');
  await ok(t, 'start', 'c2');
  t.is(await ok(t, 'exec', 'c2', '--', 'cat', '/mnt/data/data'), 'from host');
  t.not((await lxc(d.socket, 'exec', 'c2', '--', 'touch', '/mnt/data/x')).status, 0, 'readonly mount');
  await ok(t, 'stop', 'c2', '--force');
  await ok(t, 'config', 'device', 'remove', 'c2', 'data');
  const unknown = await lxc(d.socket, 'config', 'device', 'add', 'c2', 'x', 'bogus-type');
  t.not(unknown.status, 0);

  await ok(t, 'profile', 'create', 'extra');
  await ok(t, 'profile', 'set', 'extra', 'environment.GREETING', 'hi');
  await ok(t, 'profile', 'assign', 'c2', 'default,extra');
  await ok(t, 'start', 'c2');
  t.is((await ok(t, 'exec', 'c2', '--', 'sh', '-c', 'echo $GREETING')).trim(), 'hi');
  const inUse = await lxc(d.socket, 'profile', 'delete', 'extra');
  t.not(inUse.status, 0);
  t.regex(JSON.parse(await ok(t, 'query', '/1.0/profiles/extra')).used_by.join(','), /c2/);
  await ok(t, 'profile', 'assign', 'c2', 'default');
  await ok(t, 'profile', 'delete', 'extra');
});

test.serial('pause, restart, rename, console log, stop --force, delete --force', async (t) => {
  await ok(t, 'pause', 'c2');
  t.regex(await ok(t, 'info', 'c2'), /Status: FROZEN/);
  await ok(t, 'start', 'c2');
  t.regex(await ok(t, 'info', 'c2'), /Status: RUNNING/);
  const pidBefore = JSON.parse(await ok(t, 'query', '/1.0/instances/c2/state')).pid;
  await ok(t, 'restart', 'c2', '--force');
  const pidAfter = JSON.parse(await ok(t, 'query', '/1.0/instances/c2/state')).pid;
  t.not(pidAfter, pidBefore);
  const running = await lxc(d.socket, 'rename', 'c2', 'c3');
  t.not(running.status, 0, 'renaming a running instance is refused');
  await ok(t, 'stop', 'c2', '--force');
  await ok(t, 'rename', 'c2', 'c3');
  await ok(t, 'start', 'c3');
  t.is((await ok(t, 'exec', 'c3', '--', 'cat', '/etc/hostname')).trim(), 'c3', 'rename template');
  await ok(t, 'exec', 'c3', '--', 'sh', '-c', 'echo console-check > /dev/console');
  await waitFor(async () => (await lxc(d.socket, 'console', 'c3', '--show-log')).stdout.includes('console-check'), 10000, 'the console log');
  const busy = await lxc(d.socket, 'delete', 'c3');
  t.not(busy.status, 0, 'deleting a running instance needs --force');
  await ok(t, 'delete', '--force', 'c3');
  t.false(readdirSync(path.join(d.dir, 'storage-pools', 'default', 'containers')).includes('c3'));
});

test.serial('init + start, ephemeral instances vanish on stop', async (t) => {
  await ok(t, 'init', 'bb', 'e1', '--ephemeral');
  t.regex(await ok(t, 'info', 'e1'), /Status: STOPPED/);
  await ok(t, 'start', 'e1');
  await ok(t, 'stop', 'e1', '--force');
  await waitFor(async () => !(await ok(t, 'list', '--format', 'csv', '-c', 'n')).includes('e1'), 10000, 'the ephemeral instance to go');
  t.pass();
});

test.serial('image list/info/alias/export/delete', async (t) => {
  t.regex(await ok(t, 'image', 'list'), /bb/);
  t.regex(await ok(t, 'image', 'info', 'bb'), /Architecture: x86_64/);
  // Like the reference, the target is a fingerprint (or a prefix of one), not another alias.
  const fingerprint = JSON.parse(await ok(t, 'image', 'list', '--format', 'json')).find((i: any) => i.aliases.some((a: any) => a.name === 'bb')).fingerprint;
  t.not((await lxc(d.socket, 'image', 'alias', 'create', 'bb2', 'bb')).status, 0);
  await ok(t, 'image', 'alias', 'create', 'bb2', fingerprint.slice(0, 12));
  const exported = path.join(work, 'exported');
  await ok(t, 'image', 'export', 'bb2', exported);
  t.true(readdirSync(work).some((f) => f.startsWith('exported')));
  await ok(t, 'image', 'alias', 'delete', 'bb2');
  t.true(existsSync(image.unified));
});

test.serial('lxc monitor --type lifecycle shows instance events with their requestor', async (t) => {
  const monitor = spawn('lxc', ['monitor', '--type', 'lifecycle'], { env: lxcEnv(d.socket) });
  let seen = '';
  monitor.stdout.on('data', (c) => (seen += c));
  try {
    // Cause events until lxc has attached its websocket (no fixed sleep: slow machines attach late).
    let round = 0;
    await waitFor(async () => {
      await d.request('PATCH', '/1.0', { config: { 'user.watched': String(round++) } });
      await new Promise((r) => setTimeout(r, 250));
      return seen.includes('config-updated');
    }, 20000, 'lxc monitor output');
    await ok(t, 'launch', 'bb', 'm1');
    await ok(t, 'delete', '--force', 'm1');
    await waitFor(() => seen.includes('instance-deleted'), 10000, 'the delete event');
    for (const action of ['instance-created', 'instance-started', 'instance-stopped', 'instance-deleted']) t.true(seen.includes(`action: ${action}`), action);
    t.regex(seen, /source: \/1\.0\/instances\/m1/);
    t.regex(seen, /protocol: unix/);
  } finally {
    monitor.kill();
  }
});
