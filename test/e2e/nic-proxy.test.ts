/**
 * NIC and proxy devices through the real `lxc` client (Debian lxd-client 5.0.2) against corral:
 * `lxc config device add` of a macvlan NIC on a veth pair, a p2p NIC hot-plugged, `lxc info`
 * showing them, a proxy device forwarding a TCP port from the host's loopback to busybox nc inside,
 * and the daemon's errors for bad devices. All traffic stays on interfaces the test makes.
 */
import test from 'ava';
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { rmSync } from 'node:fs';
import { projectRoot, stopDaemons, waitFor, type Daemon, startWithPool } from '../helpers/daemon.js';
import path from 'node:path';
import { lxc, lxcOk, python } from '../helpers/clients.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';

const RUN = randomBytes(3).toString('hex');
const parent = `emp${RUN}`;
const peer = `emq${RUN}`;
let d: Daemon;
let image: BusyboxImage;

const ok = (t: any, ...args: string[]) => lxcOk(t, d.socket, ...args);

test.before(async () => {
  image = buildBusyboxImage('gzip');
  d = await startWithPool();
  const imported = await lxc(d.socket, 'image', 'import', image.unified, '--alias', 'bb');
  if (imported.status !== 0) throw new Error(`image import failed: ${imported.stderr}`);
  execFileSync('ip', ['link', 'add', parent, 'type', 'veth', 'peer', 'name', peer]);
  execFileSync('ip', ['link', 'set', parent, 'up']);
  execFileSync('ip', ['addr', 'add', '10.187.0.1/24', 'dev', peer]);
  execFileSync('ip', ['link', 'set', peer, 'up']);
});

test.after.always(async () => {
  await lxc(d.socket, 'delete', '--force', 'c').catch(() => undefined);
  await stopDaemons();
  spawnSync('ip', ['link', 'del', parent], { stdio: 'ignore' });
  rmSync(image.dir, { recursive: true, force: true });
});

test.serial('lxc config device add: a macvlan NIC on a veth pair, a hot-plugged p2p NIC, lxc info shows them', async (t) => {
  await ok(t, 'init', 'bb', 'c');
  await ok(t, 'config', 'device', 'add', 'c', 'eth1', 'nic', 'nictype=macvlan', `parent=${parent}`, 'name=eth1');
  await ok(t, 'start', 'c');
  const hwaddr = (await ok(t, 'config', 'get', 'c', 'volatile.eth1.hwaddr')).trim();
  t.regex(hwaddr, /^00:16:3e(:[0-9a-f]{2}){3}$/);
  // Through the macvlan to the other end of the pair.
  await ok(t, 'exec', 'c', '--', 'ip', 'addr', 'add', '10.187.0.2/24', 'dev', 'eth1');
  const ping = await lxc(d.socket, 'exec', 'c', '--', 'ping', '-c', '3', '-i', '0.2', '-W', '3', '10.187.0.1');
  t.is(ping.status, 0, ping.stdout + ping.stderr);
  const info = await ok(t, 'info', 'c');
  t.regex(info, /Network usage:/);
  t.regex(info, /eth1:/);
  t.true(info.includes(hwaddr), info);
  t.regex(info, /inet:\s+10\.187\.0\.2\/24/);

  // Hot-plugged into the running container; lxc info shows it with its host-side name.
  await ok(t, 'config', 'device', 'add', 'c', 'link', 'nic', 'nictype=p2p', 'name=eth2', `host_name=ep${RUN}`);
  const again = await ok(t, 'info', 'c');
  t.regex(again, /eth2:/);
  t.regex(again, new RegExp(`Host interface: ep${RUN}`));
  t.true(existsLink(`ep${RUN}`));
  await ok(t, 'config', 'device', 'remove', 'c', 'link');
  t.false(existsLink(`ep${RUN}`));
  t.notRegex(await ok(t, 'info', 'c'), /eth2:/);
});

test.serial('lxc config device add: a proxy device forwards a TCP port from the host loopback to busybox nc inside', async (t) => {
  const port = 30000 + Math.floor(Math.random() * 20000);
  const nc = lxc(d.socket, 'exec', 'c', '--', 'sh', '-c', 'echo served-by-nc | nc -l -p 8080');
  await waitFor(async () => (await lxc(d.socket, 'exec', 'c', '--', 'netstat', '-ltn')).stdout.includes(':8080'), 10000, 'nc listening');
  await ok(t, 'config', 'device', 'add', 'c', 'web', 'proxy', `listen=tcp:127.0.0.1:${port}`, 'connect=tcp:127.0.0.1:8080');
  t.regex(await ok(t, 'config', 'device', 'show', 'c'), /web:\n\s+connect: tcp:127\.0\.0\.1:8080/);
  const answer = await new Promise<string>((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => s.end('from-host\n'));
    let got = '';
    s.on('data', (b) => (got += b));
    s.on('end', () => resolve(got));
    s.on('error', reject);
  });
  t.is(answer, 'served-by-nc\n');
  t.is((await nc).stdout, 'from-host\n');
  await ok(t, 'config', 'device', 'remove', 'c', 'web');
  const refused = await new Promise<boolean>((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => {
      s.destroy();
      resolve(false);
    });
    s.on('error', () => resolve(true));
  });
  t.true(refused, 'the listener went with the device');
});

test.serial('lxc shows the daemon\'s errors for bad NIC and proxy devices, and adds nothing', async (t) => {
  const cases: [string[], RegExp][] = [
    [['bad', 'nic', 'nictype=macvlan', `parent=nosuch${RUN}`], /does not exist/],
    [['bad', 'nic', 'nictype=p2p', 'hwaddr=zz:zz'], /MAC address/],
    [['bad', 'nic', 'nictype=p2p', 'host_name=a-very-long-host-name'], /1 to 15 characters/],
    [['bad', 'nic', 'nictype=ipvlan', `parent=${parent}`], /not supported here/],
    [['bad', 'proxy', 'listen=tcp:127.0.0.1:1000-1002', 'connect=tcp:127.0.0.1:2000-2001'], /connect ports/],
  ];
  for (const [args, message] of cases) {
    const res = await lxc(d.socket, 'config', 'device', 'add', 'c', ...args);
    t.not(res.status, 0, args.join(' '));
    t.regex(res.stderr, message, args.join(' '));
  }
  t.notRegex(await ok(t, 'config', 'device', 'show', 'c'), /^bad:/m);
});

test.serial('pylxd adds a proxy and a NIC to a running container and reads its state back; a bad device is refused', async (t) => {
  const port = 30000 + Math.floor(Math.random() * 20000);
  const nc = lxc(d.socket, 'exec', 'c', '--', 'sh', '-c', 'echo via-pylxd-proxy | nc -l -p 8089');
  await waitFor(async () => (await lxc(d.socket, 'exec', 'c', '--', 'netstat', '-ltn')).stdout.includes(':8089'), 10000, 'nc listening');
  const run = await python(path.join(projectRoot, 'test', 'e2e', 'pylxd_devices.py'), [d.socket, String(port)]);
  t.is(run.status, 0, run.stderr);
  const seen = JSON.parse(run.stdout);
  t.regex(seen.volatile_hwaddr, /^00:16:3e/);
  t.is(seen.eth4.hwaddr, seen.volatile_hwaddr);
  t.is(seen.eth4.host_name, seen.host_name);
  t.regex(seen.bad, /MAC address/);
  const answer = await new Promise<string>((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => s.end('x'));
    let got = '';
    s.on('data', (b) => (got += b));
    s.on('end', () => resolve(got));
    s.on('error', reject);
  });
  t.is(answer, 'via-pylxd-proxy\n');
  await nc;
});

function existsLink(name: string): boolean {
  return spawnSync('ip', ['link', 'show', 'dev', name], { stdio: 'ignore' }).status === 0;
}
