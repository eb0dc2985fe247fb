/**
 * The Debian first image for real: `npm run image:debian` debootstraps a minbase bookworm from the
 * host's mirror, packs and imports it; `lxc launch debian` on a managed bridge boots systemd, whose
 * networkd gets a lease on eth0 that `lxc list` shows, and the container pings the bridge. A
 * second build takes the packages from the cache under the data dir. Skipped, with the reason,
 * when debootstrap is missing or the mirror cannot be reached from this machine.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { corrald, startWithPool, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { hasLxc, lxc, lxcOk } from '../helpers/clients.js';
import { uniqueName } from '../helpers/netns.js';
import { imageCommand } from '../helpers/image-command.js';
import { serialUnless } from '../helpers/needs.js';
import { checkMirror, hasDebootstrap } from '../../bin/images/debian.js';
import { hostDebianMirror } from '../../bin/images/apt-source.js';
import { raiseFileBudget } from '../helpers/exit-guard.js';

// Two debootstraps from the mirror and an interrupted third: up to 50 min on a slow mirror.
raiseFileBudget(55 * 60_000);
const mirror = hostDebianMirror();
const unreachable = await checkMirror(mirror, 'bookworm').then(() => undefined, (err: Error) => err.message);
const serial = serialUnless(!hasLxc() ? 'the lxc client is not installed'
  : !hasDebootstrap() ? 'debootstrap is not installed'
  : unreachable);

let d: Daemon;
const bridge = uniqueName();
const ok = (t: any, ...args: string[]) => lxcOk(t, d.socket, ...args);

test.before(async () => {
  if (unreachable === undefined) d = await startWithPool({ plugins: 'full' });
});

test.after.always(async () => {
  if (d) {
    await lxc(d.socket, 'delete', '--force', 'deb1').catch(() => undefined);
    await lxc(d.socket, 'network', 'delete', bridge).catch(() => undefined);
  }
  await stopDaemons();
});

serial('npm run image:debian debootstraps, packs and imports a Debian image; lxc launch debian on a managed bridge boots systemd and networkd gets a DHCP lease', async (t) => {
  t.timeout(40 * 60_000);
  const run = await imageCommand('debian', ['--dir', d.dir], 35 * 60_000);
  t.is(run.status, 0, `${run.stdout}\n${run.stderr}`);
  t.log(`debootstrap, pack and import: ${Math.round(run.ms / 1000)} s`);
  for (const step of [`building Debian bookworm with debootstrap from ${mirror}`, 'fetching packages from', 'Retrieving packages: 1', 'installing the packages into the rootfs', 'compressing: 100%', 'uploading: 100%']) {
    t.true(run.stdout.includes(step), `"${step}" in ${run.stdout}`);
  }
  t.regex(run.stdout, /done: debian is [0-9a-f]{64}/);
  t.is(readdirSync(path.join(d.dir, 'image-cache')).filter((n) => n.endsWith('.tgz')).length, 1, 'the packages are kept for the next build');
  t.regex(await ok(t, 'image', 'list', 'debian', '--format', 'csv', '-c', 'ld'), /^debian,"?Debian bookworm/m);

  await ok(t, 'network', 'create', bridge, 'ipv4.address=auto', 'ipv6.address=none');
  const gateway = (await ok(t, 'network', 'get', bridge, 'ipv4.address')).trim().split('/')[0]!;
  await ok(t, 'launch', 'debian', 'deb1', '-n', bridge);
  let listed = '';
  await waitFor(async () => {
    listed = (await lxc(d.socket, 'list', 'deb1', '--format', 'csv', '-c', '4')).stdout;
    return /\d+\.\d+\.\d+\.\d+ \(eth0\)/.test(listed);
  }, 120_000, 'the DHCP lease of deb1 in lxc list').catch(() => undefined);
  const address = listed.match(/(\d+\.\d+\.\d+\.\d+) \(eth0\)/)?.[1];
  t.truthy(address, `lxc list shows deb1's DHCP address: ${listed}`);
  t.is(address?.split('.').slice(0, 3).join('.'), gateway.split('.').slice(0, 3).join('.'), 'the lease is in the bridge subnet');
  t.is((await ok(t, 'exec', 'deb1', '--', 'cat', '/proc/1/comm')).trim(), 'systemd');
  t.is((await ok(t, 'exec', 'deb1', '--', 'hostname')).trim(), 'deb1');
  await ok(t, 'exec', 'deb1', '--', 'ping', '-c1', '-W3', gateway);
  t.regex(await ok(t, 'exec', 'deb1', '--', 'ip', 'route', 'show', 'default'), new RegExp(`default via ${gateway.replace(/\./g, '\\.')}`));

  // The second build takes the packages from the cache: no fetching.
  const again = await imageCommand('debian', ['--dir', d.dir, '--alias', 'debian2'], 35 * 60_000);
  t.is(again.status, 0, `${again.stdout}\n${again.stderr}`);
  t.true(again.stdout.includes('using the packages kept in'), again.stdout);
  t.false(again.stdout.includes('Retrieving packages'), again.stdout);
  t.log(`second build from the cache: ${Math.round(again.ms / 1000)} s`);
});

serial('image:debian interrupted (Ctrl-C to its process group) while debootstrap installs: exit 130, debootstrap stopped, no mounts and no build dir left, nothing imported', async (t) => {
  t.timeout(10 * 60_000);
  const before = (await ok(t, 'image', 'list', '--format', 'csv', '-c', 'F')).trim();
  // Its own process group, as a terminal gives a foreground command: the signal reaches debootstrap too.
  const child = spawn(process.execPath, [corrald, 'image', 'debian', '--dir', d.dir, '--alias', 'debian3'], { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c) => (stdout += c));
  child.stderr.on('data', (c) => (stderr += c));
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  // debootstrap has /proc mounted in the tree by the time it configures packages.
  await waitFor(() => stdout.includes('Configuring required packages'), 8 * 60_000, 'debootstrap configuring packages');
  process.kill(-child.pid!, 'SIGINT');
  t.is(await exited, 130, `${stdout}\n${stderr}`);
  t.regex(stderr, /interrupted \(SIGINT\); nothing was imported/);
  t.deepEqual(readdirSync(d.dir).filter((n) => n.startsWith('corral-image-')), [], 'no build dir left');
  t.false(readFileSync('/proc/self/mounts', 'utf8').includes(`${d.dir}/corral-image-`), 'no mount left');
  t.is((await ok(t, 'image', 'list', '--format', 'csv', '-c', 'F')).trim(), before);
});
