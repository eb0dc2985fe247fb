/**
 * unix-char and unix-block devices on real containers through the real `lxc` client (and pylxd):
 * added to and removed from running containers (node inside, device cgroup rule, host node), a
 * loop block device written from inside, started with a stopped container, kept across a daemon
 * restart, `required=false` with an absent source, and bad input refused with nothing applied.
 */
import test from 'ava';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { killContainers, projectRoot, startDaemon, startWithPool, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { importImage } from '../helpers/api.js';
import { lxc, lxcOk, python } from '../helpers/clients.js';
import { claimsNamed } from '../helpers/claims.js';

let d: Daemon;
let image: BusyboxImage;
const dataDir = mkdtempSync(path.join(tmpdir(), 'corral-u1-'));
const scratch = mkdtempSync(path.join(tmpdir(), 'u1-unix-'));
const loops: string[] = [];

const run = (t: any, ...args: string[]) => lxcOk(t, d.socket, ...args);
const inside = (name: string, ...command: string[]) => lxc(d.socket, 'exec', name, '--', ...command);
const nodesDir = (name: string) => path.join(dataDir, 'devices', 'unix', name);

/** The devices cgroup (v1) of a running container's init, as the kernel lists it. */
async function devicesList(name: string): Promise<string> {
  const pid = (await d.request('GET', `/1.0/instances/${name}/state`)).json.metadata.pid as number;
  const line = readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n').find((l) => /:devices:/.test(l))!;
  return readFileSync(path.join('/sys/fs/cgroup/devices', line.split(':')[2]!, 'devices.list'), 'utf8');
}

const hasV1Devices = existsSync('/sys/fs/cgroup/devices/devices.list');

test.before(async () => {
  image = buildBusyboxImage('gzip');
  d = await startWithPool({ dir: dataDir, plugins: 'full' });
  await importImage(d, image.unified, 'bb');
});

test.after.always(async () => {
  killContainers(dataDir);
  await stopDaemons();
  for (const loop of loops) spawnSync('losetup', ['-d', loop]);
  rmSync(image.dir, { recursive: true, force: true });
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(scratch, { recursive: true, force: true });
});

test.serial('unix_device_rename: a unix-char device added live at another path, usable inside, removed live', async (t) => {
  await run(t, 'launch', 'bb', 'u1a');
  await run(t, 'config', 'device', 'add', 'u1a', 'n', 'unix-char', 'source=/dev/null', 'path=/dev/mynull');
  t.regex((await inside('u1a', 'stat', '-c', '%F %t:%T %a %u:%g', '/dev/mynull')).stdout.trim(), /^character special file 1:3 660 0:0$/);
  t.is((await inside('u1a', 'sh', '-c', 'echo hello > /dev/mynull')).status, 0);
  t.is(readdirSync(nodesDir('u1a')).length, 1);

  // Only `path`: the source is the same path on the host.
  await run(t, 'config', 'device', 'add', 'u1a', 'z', 'unix-char', 'path=/dev/zero', 'uid=1000', 'gid=1001', 'mode=0600');
  t.regex((await inside('u1a', 'stat', '-c', '%t:%T %a %u:%g', '/dev/zero')).stdout.trim(), /^1:5 600 1000:1001$/);
  t.is((await inside('u1a', 'sh', '-c', 'head -c 4 /dev/zero | wc -c')).stdout.trim(), '4');

  await run(t, 'config', 'device', 'remove', 'u1a', 'n');
  t.not((await inside('u1a', 'ls', '/dev/mynull')).status, 0);
  // The base /dev/null rule stays: the container's own /dev/null still works.
  t.is((await inside('u1a', 'sh', '-c', 'echo x > /dev/null')).status, 0);
  await run(t, 'config', 'device', 'remove', 'u1a', 'z');
  t.deepEqual(readdirSync(nodesDir('u1a')), []);
});

test.serial('unix-block: a loop device added live, written from inside with dd and read on the host; its cgroup rule goes at removal', async (t) => {
  if (!hasV1Devices) return t.pass('no v1 devices cgroup on this host: hot-plug of nodes is refused there');
  const file = path.join(scratch, 'disk.img');
  writeFileSync(file, Buffer.alloc(1 << 20));
  const loop = execFileSync('losetup', ['-f', '--show', file], { encoding: 'utf8' }).trim();
  loops.push(loop);
  const minor = Number(/loop(\d+)$/.exec(loop)![1]);
  await run(t, 'launch', 'bb', 'u1b');
  t.notRegex(await devicesList('u1b'), new RegExp(`^b 7:${minor} rwm$`, 'm'));
  await run(t, 'config', 'device', 'add', 'u1b', 'disk', 'unix-block', `source=${loop}`, 'path=/dev/u1disk');
  t.regex(await devicesList('u1b'), new RegExp(`^b 7:${minor} rwm$`, 'm'));
  const dd = await inside('u1b', 'sh', '-c', 'echo from-the-container | dd of=/dev/u1disk bs=512 count=1 conv=sync,fsync 2>&1');
  t.is(dd.status, 0, dd.stdout);
  spawnSync('blockdev', ['--flushbufs', loop]);
  t.is(readFileSync(file).subarray(0, 18).toString(), 'from-the-container');

  await run(t, 'config', 'device', 'remove', 'u1b', 'disk');
  t.not((await inside('u1b', 'ls', '/dev/u1disk')).status, 0);
  t.notRegex(await devicesList('u1b'), new RegExp(`^b 7:${minor} rwm$`, 'm'));
  t.deepEqual(readdirSync(nodesDir('u1b')), []);
  await run(t, 'delete', '--force', 'u1b');
});

test.serial('unix_device_hotplug: a stopped container starts with its devices, one required=false and absent skipped; nodes go at stop', async (t) => {
  await run(t, 'init', 'bb', 'u1s');
  await run(t, 'config', 'device', 'add', 'u1s', 'n', 'unix-char', 'source=/dev/null', 'path=/dev/u1null', 'uid=5', 'mode=0666');
  await run(t, 'config', 'device', 'add', 'u1s', 'gone', 'unix-char', 'source=/dev/u1-absent', 'required=false');
  await run(t, 'start', 'u1s');
  t.regex((await inside('u1s', 'stat', '-c', '%t:%T %a %u', '/dev/u1null')).stdout.trim(), /^1:3 666 5$/);
  t.is((await inside('u1s', 'sh', '-c', 'echo hi > /dev/u1null')).status, 0);
  t.not((await inside('u1s', 'ls', '/dev/u1-absent')).status, 0);
  t.is(readdirSync(nodesDir('u1s')).length, 1);
  await run(t, 'stop', 'u1s', '--force');
  t.false(existsSync(nodesDir('u1s')));

  // required (the default) and absent: the start fails naming the device, nothing left running.
  await run(t, 'config', 'device', 'set', 'u1s', 'gone', 'required=true');
  const failed = await lxc(d.socket, 'start', 'u1s');
  t.not(failed.status, 0);
  t.regex(failed.stderr, /Device "gone".*\/dev\/u1-absent.*does not exist/);
  t.regex(await run(t, 'list', 'u1s', '--format', 'csv', '-c', 'ns'), /u1s,STOPPED/);
  t.false(existsSync(nodesDir('u1s')));
  await run(t, 'delete', 'u1s');
});

test.serial('a privileged container gets the node with the ids as given (no map)', async (t) => {
  await run(t, 'init', 'bb', 'u1p', '-c', 'security.privileged=true');
  await run(t, 'config', 'device', 'add', 'u1p', 'z', 'unix-char', 'source=/dev/zero', 'path=/dev/u1zero', 'uid=1000', 'gid=1000');
  await run(t, 'start', 'u1p');
  t.is((await inside('u1p', 'stat', '-c', '%t:%T %u:%g', '/dev/u1zero')).stdout.trim(), '1:5 1000:1000');
  await run(t, 'delete', '--force', 'u1p');
  t.false(existsSync(nodesDir('u1p')));
});

test.serial('a profile device reaches a running container and leaves with the profile; required=false with an absent source is accepted live', async (t) => {
  await run(t, 'launch', 'bb', 'u1q');
  await run(t, 'config', 'device', 'add', 'u1q', 'opt', 'unix-char', 'source=/dev/u1-absent', 'required=false');
  t.not((await inside('u1q', 'ls', '/dev/u1-absent')).status, 0);
  await run(t, 'profile', 'create', 'u1prof');
  await run(t, 'profile', 'device', 'add', 'u1prof', 'pn', 'unix-char', 'source=/dev/null', 'path=/dev/u1pnull');
  await run(t, 'profile', 'add', 'u1q', 'u1prof');
  t.is((await inside('u1q', 'stat', '-c', '%t:%T', '/dev/u1pnull')).stdout.trim(), '1:3');
  await run(t, 'profile', 'remove', 'u1q', 'u1prof');
  t.not((await inside('u1q', 'ls', '/dev/u1pnull')).status, 0);
  t.deepEqual(readdirSync(nodesDir('u1q')), []);
  await run(t, 'delete', '--force', 'u1q');
  await run(t, 'profile', 'delete', 'u1prof');
});

test.serial('a device added live survives a daemon restart and is still removed after it; nodes of a container stopped meanwhile go at boot', async (t) => {
  await run(t, 'launch', 'bb', 'u1r');
  await run(t, 'config', 'device', 'add', 'u1r', 'z', 'unix-char', 'source=/dev/zero', 'path=/dev/u1zero');
  t.is((await inside('u1r', 'ls', '/dev/u1zero')).status, 0);
  // Another one stopped behind the daemon's back (not restarted at boot) keeps its host node until the daemon starts again.
  await run(t, 'launch', 'bb', 'u1o', '-c', 'boot.autostart=false');
  await run(t, 'config', 'device', 'add', 'u1o', 'z', 'unix-char', 'source=/dev/zero', 'path=/dev/u1zero');
  execFileSync('lxc-stop', ['-n', 'u1o', '-P', path.join(dataDir, 'containers'), '-k'], { timeout: 30000 });
  t.is(readdirSync(nodesDir('u1o')).length, 1);
  await d.stop();
  d = await startDaemon({ dir: dataDir, plugins: 'full' });
  t.regex(await run(t, 'list', 'u1r', '--format', 'csv', '-c', 'ns'), /u1r,RUNNING/);
  // The boot's leftover pass may end after the socket opens.
  await waitFor(() => !existsSync(nodesDir('u1o')), 15000, 'the stopped container\'s nodes to go').catch(() => undefined);
  t.false(existsSync(nodesDir('u1o')));
  t.is(readdirSync(nodesDir('u1r')).length, 1);
  t.is((await inside('u1r', 'ls', '/dev/u1zero')).status, 0);
  await run(t, 'config', 'device', 'remove', 'u1r', 'z');
  t.not((await inside('u1r', 'ls', '/dev/u1zero')).status, 0);
  t.deepEqual(readdirSync(nodesDir('u1r')), []);
  await run(t, 'delete', '--force', 'u1r');
  await run(t, 'delete', '--force', 'u1o');
});

test.serial('bad unix device input is a 400 and nothing is applied', async (t) => {
  await run(t, 'launch', 'bb', 'u1x');
  const cases: [Record<string, string>, RegExp][] = [
    [{ type: 'unix-char' }, /need "source" or "path"/],
    [{ type: 'unix-char', source: '/dev/null', major: '99999999' }, /"major".*out of range/],
    [{ type: 'unix-char', source: '/dev/null', minor: '-1' }, /"minor"/],
    [{ type: 'unix-char', source: '/dev/null', mode: 'abc' }, /"mode".*octal/],
    [{ type: 'unix-char', source: '/dev/null', bogus: '1' }, /Invalid device option "bogus"/],
    [{ type: 'unix-char', source: 'dev/null' }, /absolute path/],
    [{ type: 'unix-block', source: '/dev/null' }, /not a block device/],
    [{ type: 'unix-char', source: '/dev/u1-absent' }, /does not exist/],
  ];
  const before = (await d.request('GET', '/1.0/instances/u1x')).json.metadata;
  for (const [device, message] of cases) {
    const res = await d.request('PATCH', '/1.0/instances/u1x', { devices: { bad: device } });
    t.is(res.status, 400, JSON.stringify(device));
    t.regex(res.json.error, message);
  }
  const after = (await d.request('GET', '/1.0/instances/u1x')).json.metadata;
  t.deepEqual(after.devices, before.devices);
  t.deepEqual(existsSync(nodesDir('u1x')) ? readdirSync(nodesDir('u1x')) : [], []);
  const viaLxc = await lxc(d.socket, 'config', 'device', 'add', 'u1x', 'bad', 'unix-char', 'source=/dev/null', 'major=99999999');
  t.not(viaLxc.status, 0);
  t.regex(viaLxc.stderr, /out of range/);
});

test.serial('pylxd adds and removes a unix-char device through container.devices and save(wait=True)', async (t) => {
  const res = await python(path.join(projectRoot, 'test', 'e2e', 'pylxd_unix_devices.py'), [d.socket, 'u1x']);
  t.is(res.status, 0, res.stderr);
  const out = JSON.parse(res.stdout.trim().split('\n').pop()!);
  t.is(out.added, 'character special file 1:5 640');
  t.not(out.gone_exit, 0);
  t.false(out.devices.includes('pyzero'));
});

test('every extension name unix-devices claims is named by a test that exercises it, and advertised', async (t) => {
  const { claims, unnamed } = claimsNamed('unix-devices');
  t.true(claims.length > 0);
  t.deepEqual(unnamed, []);
  const advertised: string[] = (await d.request('GET', '/1.0')).json.metadata.api_extensions;
  t.deepEqual(claims.filter((c) => !advertised.includes(c)), []);
});
