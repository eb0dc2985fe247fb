/**
 * A running VM's guest agent through the real clients: `lxc exec` (exit code, outputs, recorded
 * output, stdin with and without a terminal, an interactive shell under a pty), `lxc info`
 * (processes and memory from the agent), files through the instances family's file routes (`lxc file push/pull/delete` with
 * modes and owners, `push -r`/`pull -r`, pylxd), the agent reached again after the daemon is
 * killed and restarted (its sessions of before ended), and a stopped VM's files refused with a 400.
 */
import test from 'ava';
import { createRequire } from 'node:module';
import { mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { processesWith } from '../helpers/processes.js';
import { projectRoot, startDaemon, startWithPool, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { hasLxc, lxc, lxcEnv, lxcOk, lxcRefused, lxcWithInput, python } from '../helpers/clients.js';
import { assertEndOfInput } from '../helpers/exec-input.js';
import { serialUnless } from '../helpers/needs.js';
import { callAndWait } from '../helpers/api.js';
import { importTestVmImage, vmProblem } from '../helpers/vm-image.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';

const require = createRequire(import.meta.url);
const serial = serialUnless(vmProblem() ?? (hasLxc() ? undefined : 'the lxc client is not installed'));
let d: Daemon;
let work: string;
/** The data directory, kept across the daemon restart. */
let dataDir: string;
let containerImage: BusyboxImage | undefined;

test.before(async () => {
  if (vmProblem() || !hasLxc()) return;
  dataDir = mkdtempSync(path.join(tmpdir(), 'corral-vmag-'));
  d = await startWithPool({ dir: dataDir, plugins: 'full' });
  work = mkdtempSync(path.join(tmpdir(), 'vm-files-'));
  await importTestVmImage(d.socket);
  const launched = await lxc(d.socket, 'launch', 'busybox-vm', 'v1', '--vm', '-c', 'limits.memory=256MiB', '-c', 'limits.cpu=1');
  if (launched.status !== 0) throw new Error(`launch failed: ${launched.stderr}\n${d.output().slice(-3000)}`);
  // The agent comes up a few seconds after the start; until then exec and files are refused.
  await waitFor(async () => (await lxc(d.socket, 'exec', 'v1', '--', 'true')).status === 0, 90_000, 'the VM agent');
});

test.after.always(async () => {
  if (d) for (const name of ['v1', 'c1']) await lxc(d.socket, 'delete', '--force', name);
  if (containerImage) rmSync(containerImage.dir, { recursive: true, force: true });
  await stopDaemons();
  // Whatever a failed test left of this directory's VMs.
  if (dataDir) for (const p of processesWith(`${dataDir}/qemu/`)) process.kill(p.pid, 'SIGKILL');
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  if (work) rmSync(work, { recursive: true, force: true });
});

serial('lxc exec on a VM: exit code, separate outputs, environment, working directory, user', async (t) => {
  const run = await lxc(d.socket, 'exec', 'v1', '--', 'sh', '-c', 'echo out; echo err >&2; exit 4');
  t.is(run.status, 4);
  t.is(run.stdout, 'out\n');
  t.is(run.stderr, 'err\n');
  const context = await lxcOk(t, d.socket, 'exec', 'v1', '--env', 'X=y', '--cwd', '/tmp', '--user', '1000', '--group', '1000', '--',
    'sh', '-c', 'echo "$X $(pwd) $(id -u):$(id -g)"');
  t.is(context, 'y /tmp 1000:1000\n');
});

serial('exec on a VM with recorded output (the API, as pylxd and scripts use it)', async (t) => {
  const exec = await callAndWait(d, 'POST', '/1.0/instances/v1/exec', {
    command: ['sh', '-c', 'echo recorded; echo problem >&2; exit 2'], 'record-output': true, 'wait-for-websocket': false, interactive: false,
  });
  t.is(exec.op.metadata.return, 2);
  t.is((await d.request('GET', exec.op.metadata.output['1'])).body, 'recorded\n');
  t.is((await d.request('GET', exec.op.metadata.output['2'])).body, 'problem\n');
});

serial('end of input reaches a command in a VM: echo x | lxc exec v1 -- cat, with -T and -t too', async (t) => {
  // More lines than a pipe holds and the agent's window.
  await assertEndOfInput(t, d.socket, 'v1', 40000);
});

serial('interactive lxc exec on a VM through a pty: size, a command, exit status', async (t) => {
  const pty = require('node-pty');
  const term = pty.spawn('lxc', ['exec', 'v1', '--', 'sh'], { cols: 100, rows: 30, env: lxcEnv(d.socket) });
  let out = '';
  term.onData((s: string) => (out += s));
  const exited = new Promise<number>((r) => term.onExit((e: { exitCode: number }) => r(e.exitCode)));
  await waitFor(() => out.includes('#'), 20_000, 'the prompt');
  term.write('stty size; echo marker-$((6*7))\r');
  await waitFor(() => out.includes('marker-42'), 20_000, 'the command output');
  t.regex(out, /30 100/);
  term.write('exit 5\r');
  t.is(await exited, 5);
});

serial('exec round trip through lxc: a VM beside a container of the same daemon (figures logged)', async (t) => {
  containerImage = buildBusyboxImage('gzip');
  await lxcOk(t, d.socket, 'image', 'import', containerImage.unified, '--alias', 'ct');
  await lxcOk(t, d.socket, 'launch', 'ct', 'c1');
  const median = async (name: string): Promise<number> => {
    const times: number[] = [];
    for (let i = 0; i < 9; i++) {
      const started = process.hrtime.bigint();
      await lxcOk(t, d.socket, 'exec', name, '--', 'true');
      times.push(Number(process.hrtime.bigint() - started) / 1e6);
    }
    return times.sort((a, b) => a - b)[4]!;
  };
  const vm = await median('v1');
  const container = await median('c1');
  t.log(`lxc exec -- true, median of 9: VM ${vm.toFixed(0)} ms, container ${container.toFixed(0)} ms (${(vm / container).toFixed(2)}x)`);
  await lxcOk(t, d.socket, 'delete', '--force', 'c1');
  t.pass();
});

serial('lxc info on a VM: processes and memory as the agent reports them', async (t) => {
  const info = await lxcOk(t, d.socket, 'info', 'v1');
  const processes = Number(info.match(/Processes: (\d+)/)?.[1]);
  t.true(processes > 3, info);
  t.regex(info, /Memory usage:/);
});

serial('lxc file push and pull a 1 MiB file with its mode and owner; delete', async (t) => {
  const local = path.join(work, 'blob');
  const content = randomBytes(1024 * 1024);
  writeFileSync(local, content);
  await lxcOk(t, d.socket, 'file', 'push', local, 'v1/root/blob', '--mode', '0640', '--uid', '1000', '--gid', '1001');
  t.is((await lxcOk(t, d.socket, 'exec', 'v1', '--', 'stat', '-c', '%a %u %g %s', '/root/blob')).trim(), `640 1000 1001 ${content.length}`);

  const back = path.join(work, 'back');
  await lxcOk(t, d.socket, 'file', 'pull', 'v1/root/blob', back);
  t.true(readFileSync(back).equals(content));
  t.is(statSync(back).mode & 0o777, 0o640);

  // Pushed again: the existing file keeps its owner and mode, as for containers.
  await lxcOk(t, d.socket, 'file', 'push', local, 'v1/root/blob', '--mode', '0600');
  t.is((await lxcOk(t, d.socket, 'exec', 'v1', '--', 'stat', '-c', '%a %u %g', '/root/blob')).trim(), '640 1000 1001');

  await lxcOk(t, d.socket, 'file', 'delete', 'v1/root/blob');
  t.is((await lxcOk(t, d.socket, 'exec', 'v1', '--', 'ls', '/root')).trim(), '');
  const missing = await lxcRefused(t, d.socket, 'file', 'pull', 'v1/root/blob', back);
  t.regex(missing, /not found|No such file/i);
});

serial('lxc file push -r and pull -r: a tree with a subdirectory and a symlink', async (t) => {
  const tree = path.join(work, 'tree');
  mkdirSync(path.join(tree, 'sub'), { recursive: true });
  writeFileSync(path.join(tree, 'a.txt'), 'alpha\n');
  writeFileSync(path.join(tree, 'sub', 'b.txt'), 'beta\n');
  symlinkSync('sub/b.txt', path.join(tree, 'link'));
  await lxcOk(t, d.socket, 'file', 'push', '-r', tree, 'v1/root/');
  const listed = await lxcOk(t, d.socket, 'exec', 'v1', '--', 'find', '/root/tree');
  t.deepEqual(listed.trim().split('\n').sort(), ['/root/tree', '/root/tree/a.txt', '/root/tree/link', '/root/tree/sub', '/root/tree/sub/b.txt']);
  t.is((await lxcOk(t, d.socket, 'exec', 'v1', '--', 'readlink', '/root/tree/link')).trim(), 'sub/b.txt');
  t.is(await lxcOk(t, d.socket, 'exec', 'v1', '--', 'cat', '/root/tree/sub/b.txt'), 'beta\n');

  const pulled = path.join(work, 'pulled');
  mkdirSync(pulled);
  await lxcOk(t, d.socket, 'file', 'pull', '-r', 'v1/root/tree', pulled);
  t.is(readFileSync(path.join(pulled, 'tree', 'a.txt'), 'utf8'), 'alpha\n');
  t.is(readFileSync(path.join(pulled, 'tree', 'sub', 'b.txt'), 'utf8'), 'beta\n');
  t.is(readlinkSync(path.join(pulled, 'tree', 'link')), 'sub/b.txt');
});

serial('pylxd exec and files on a VM: exit code and output; put with mode and owner, get, delete', async (t) => {
  const script = path.join(projectRoot, 'test', 'e2e', 'pylxd_vm_agent.py');
  const exec = await python(script, [d.socket, 'v1', 'exec']);
  t.is(exec.status, 0, exec.stderr);
  t.deepEqual(JSON.parse(exec.stdout), { exit_code: 3, stdout: 'from pylxd\n' });
  const put = await python(script, [d.socket, 'v1', 'put-get']);
  t.is(put.status, 0, put.stderr);
  t.deepEqual(JSON.parse(put.stdout), { file: 'written by pylxd', mode: '0600', uid: '1000' });
  t.is((await lxcOk(t, d.socket, 'exec', 'v1', '--', 'stat', '-c', '%a %u %g', '/root/py.txt')).trim(), '600 1000 1000');
  const removed = await python(script, [d.socket, 'v1', 'delete']);
  t.is(removed.status, 0, removed.stderr);
  t.deepEqual(JSON.parse(removed.stdout), { get_deleted: 'not found' });
  t.notRegex(await lxcOk(t, d.socket, 'exec', 'v1', '--', 'ls', '/root'), /py\.txt/);
});

serial('the daemon killed and restarted: the VM is adopted, its agent reached again, sessions of before ended', async (t) => {
  const sleeper = lxc(d.socket, 'exec', 'v1', '--', 'sleep', '4242');
  const sleeping = async () => (await lxc(d.socket, 'exec', 'v1', '--', 'sh', '-c', 'ps | grep -c "[s]leep 4242"')).stdout.trim();
  await waitFor(async () => (await sleeping()) === '1', 20_000, 'the sleep in the guest');
  d.child.kill('SIGKILL');
  await sleeper;
  d = await startDaemon({ dir: dataDir, plugins: 'full' });
  await waitFor(async () => (await lxc(d.socket, 'exec', 'v1', '--', 'true')).status === 0, 30_000, 'the agent after the restart');
  t.is(await lxcOk(t, d.socket, 'exec', 'v1', '--', 'echo', 'back'), 'back\n');
  // The new daemon's greeting ended what the old one had started.
  t.is(await sleeping(), '0');
});

serial('the files API on a VM: errors as for containers, then a stopped VM refused with a 400', async (t) => {
  const dir = await d.request('GET', '/1.0/instances/v1/files?path=/etc');
  t.is(dir.status, 200);
  t.is(dir.headers['x-lxd-type'], 'directory');
  t.true((dir.json.metadata as string[]).includes('inittab'));
  t.is((await d.request('GET', '/1.0/instances/v1/files?path=/no/such')).status, 404);
  t.is((await d.request('DELETE', '/1.0/instances/v1/files?path=/etc')).status, 400);

  await lxcOk(t, d.socket, 'stop', '--force', 'v1');
  const stopped = await d.request('GET', '/1.0/instances/v1/files?path=/etc/inittab');
  t.is(stopped.status, 400);
  t.regex(stopped.json.error, /must be running/);
  const refused = await lxcRefused(t, d.socket, 'file', 'push', path.join(work, 'tree', 'a.txt'), 'v1/root/a.txt');
  t.regex(refused, /must be running/);
});
