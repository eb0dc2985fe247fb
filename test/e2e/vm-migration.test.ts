/**
 * Virtual machines between two corral daemons over HTTPS on loopback, with the real `lxc`: a
 * stopped VM with a snapshot copies across (its disk and the snapshot's, kept sparse, the record a
 * virtual machine's) and boots there to an agent that answers; `lxc move` takes another across and
 * removes the source.
 */
import test from 'ava';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startWithPool, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { RemoteClient } from '../helpers/remotes.js';
import { serialUnless } from '../helpers/needs.js';
import { importTestVmImage, vmProblem } from '../helpers/vm-image.js';

const PASSWORD = 'vm-migr-18';
const client = new RemoteClient(PASSWORD);
const { lxc: remoteLxc, ok, listen } = client;
const serial = serialUnless(vmProblem());
let source: Daemon;
let target: Daemon;
let work: string;
const SIZE = 512 * 1024 * 1024;

const disk = (daemon: Daemon, name: string, snapshot?: string) => snapshot
  ? path.join(daemon.dir, 'storage-pools/default/virtual-machines-snapshots', name, snapshot, 'root.img')
  : path.join(daemon.dir, 'storage-pools/default/virtual-machines', name, 'root.img');

function mark(file: string, text: string): void {
  writeFileSync(path.join(work, 'marker'), text);
  writeFileSync(path.join(work, 'cmds'), `rm /marker\nwrite ${path.join(work, 'marker')} /marker\n`);
  execFileSync('debugfs', ['-w', '-f', path.join(work, 'cmds'), file], { stdio: 'ignore' });
}
const marker = (file: string) => spawnSync('debugfs', ['-R', 'cat /marker', file], { encoding: 'utf8' }).stdout;

test.before(async () => {
  if (vmProblem()) return;
  work = mkdtempSync(path.join(tmpdir(), 'corral-vm-migr-'));
  source = await startWithPool({ plugins: 'full' });
  target = await startWithPool({ plugins: 'full' });
  await importTestVmImage(source.socket, 'busybox-vm');
  const [u1, u2] = await Promise.all([listen(source, '127.0.18.21'), listen(target, '127.0.18.22')]);
  for (const [name, url] of [['r1', u1], ['r2', u2]] as const) {
    const res = await remoteLxc('remote', 'add', name, url, '--password', PASSWORD, '--accept-certificate');
    if (res.status !== 0) throw new Error(`remote add ${name}: ${res.stderr}`);
  }
});

test.after.always(async () => {
  for (const [remote, name] of [['r2', 'v1'], ['r2', 'v2'], ['r1', 'v1'], ['r1', 'v2']]) await remoteLxc('delete', '--force', `${remote}:${name}`).catch(() => undefined);
  await stopDaemons();
  client.remove();
  if (work) rmSync(work, { recursive: true, force: true });
});

serial('lxc copy r1:v1 r2:v1 carries a stopped VM\'s disk and its snapshot\'s, sparse, and the VM boots there', async (t) => {
  await ok(t, 'init', 'r1:busybox-vm', 'r1:v1', '--vm', '-d', `root,size=${SIZE}`, '-c', 'limits.memory=256MiB');
  mark(disk(source, 'v1'), 'one');
  await ok(t, 'snapshot', 'r1:v1', 's1');
  mark(disk(source, 'v1'), 'two');
  await ok(t, 'copy', 'r1:v1', 'r2:v1');
  const inst = JSON.parse(await ok(t, 'query', 'r2:/1.0/instances/v1'));
  t.is(inst.type, 'virtual-machine');
  t.is(inst.status, 'Stopped');
  t.is(marker(disk(target, 'v1')), 'two');
  t.is(marker(disk(target, 'v1', 's1')), 'one');
  t.is(statSync(disk(target, 'v1')).size, SIZE);
  t.true(statSync(disk(target, 'v1')).blocks * 512 < 128 * 1024 * 1024, `${statSync(disk(target, 'v1')).blocks * 512} bytes allocated`);
  t.is(statSync(disk(target, 'v1')).mode & 0o777, 0o600);
  await ok(t, 'start', 'r2:v1');
  let answer = '';
  const deadline = Date.now() + 90_000;
  while (Date.now() < deadline) {
    const run = await remoteLxc('exec', 'r2:v1', '--', 'cat', '/marker');
    if (run.status === 0) {
      answer = run.stdout;
      break;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  t.is(answer, 'two');
  await ok(t, 'stop', 'r2:v1', '--force');
});

serial('lxc move r1:v1 r2:v2 takes the VM across and removes it from the source', async (t) => {
  await ok(t, 'move', 'r1:v1', 'r2:v2');
  t.is(marker(disk(target, 'v2')), 'two');
  t.is((await remoteLxc('info', 'r1:v1')).status, 1);
});
