/**
 * The first image, as the README's getting-started flow runs it: `npm run image:busybox` builds the
 * busybox image and imports it into the running daemon; `lxc launch busybox c1` on a managed bridge
 * the test makes (a NIC in the default profile) brings eth0 up by DHCP from the image's own boot,
 * `lxc list` shows the lease and the container pings the bridge. Then what a user gets wrong: a
 * daemon that is not running, bad arguments, an alias that exists (moved to the new image, as
 * `lxc image import --alias` moves it), an unreachable Debian mirror.
 */
import test from 'ava';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startWithPool, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { lxc, lxcOk } from '../helpers/clients.js';
import { uniqueName } from '../helpers/netns.js';
import { imageCommand } from '../helpers/image-command.js';
import { serialUnless, withLxcClient } from '../helpers/needs.js';
import { hasDebootstrap } from '../../bin/images/debian.js';

let d: Daemon;
const bridge = uniqueName();
const ok = (t: any, ...args: string[]) => lxcOk(t, d.socket, ...args);
const serial = withLxcClient();
const withDebootstrap = serialUnless(hasDebootstrap() ? undefined : 'debootstrap is not installed');

const fingerprints = async () => JSON.parse((await lxc(d.socket, 'image', 'list', '--format', 'json')).stdout).map((i: any) => i.fingerprint as string).sort();
const workDirs = () => readdirSync(d.dir).filter((n) => n.startsWith('corral-image-'));

test.before(async () => {
  d = await startWithPool({ plugins: 'full' });
});

test.after.always(async () => {
  await lxc(d.socket, 'delete', '--force', 'c1').catch(() => undefined);
  await lxc(d.socket, 'profile', 'device', 'remove', 'default', 'eth0').catch(() => undefined);
  await lxc(d.socket, 'network', 'delete', bridge).catch(() => undefined);
  await stopDaemons();
});

serial('npm run image:busybox builds and imports the image with progress; lxc launch busybox on a managed bridge gets a DHCP lease and pings the bridge', async (t) => {
  const run = await imageCommand('busybox', ['--dir', d.dir]);
  t.is(run.status, 0, run.stderr);
  t.log(`build and import: ${run.ms} ms (npm included)`);
  for (const step of ['building the busybox rootfs', 'compressing: 100%', 'uploading: 100%', 'unpacking on the daemon']) t.true(run.stdout.includes(step), `"${step}" in ${run.stdout}`);
  const fingerprint = run.stdout.match(/done: busybox is ([0-9a-f]{64})/)?.[1];
  t.truthy(fingerprint, run.stdout);
  t.regex(await ok(t, 'image', 'list', 'busybox', '--format', 'csv', '-c', 'lf'), new RegExp(`^busybox,${fingerprint!.slice(0, 12)}`, 'm'));
  // The budget the issue sets is 5 s on an idle machine; a loaded CI machine gets room, the figure is logged.
  t.true(run.ms < 30_000, `took ${run.ms} ms`);

  await ok(t, 'network', 'create', bridge, 'ipv4.address=auto', 'ipv6.address=none');
  const gateway = (await ok(t, 'network', 'get', bridge, 'ipv4.address')).trim().split('/')[0]!;
  await ok(t, 'profile', 'device', 'add', 'default', 'eth0', 'nic', `network=${bridge}`, 'name=eth0');
  await ok(t, 'launch', 'busybox', 'c1');
  let listed = '';
  await waitFor(async () => {
    listed = (await lxc(d.socket, 'list', 'c1', '--format', 'csv', '-c', '4')).stdout;
    return /\d+\.\d+\.\d+\.\d+ \(eth0\)/.test(listed);
  }, 30_000, 'the DHCP lease of c1 in lxc list').catch(() => undefined);
  const address = listed.match(/(\d+\.\d+\.\d+\.\d+) \(eth0\)/)?.[1];
  t.truthy(address, `lxc list shows c1's DHCP address: ${listed}`);
  t.is(address!.split('.').slice(0, 3).join('.'), gateway.split('.').slice(0, 3).join('.'), 'the lease is in the bridge subnet');
  await ok(t, 'exec', 'c1', '--', 'ping', '-c1', '-W3', gateway);
  // default.script set the route and resolv.conf from the lease; the templates named the host.
  t.regex(await ok(t, 'exec', 'c1', '--', 'ip', 'route', 'show', 'default'), new RegExp(`default via ${gateway.replace(/\./g, '\\.')} dev eth0`));
  t.regex(await ok(t, 'exec', 'c1', '--', 'cat', '/etc/resolv.conf'), new RegExp(`nameserver ${gateway.replace(/\./g, '\\.')}`));
  t.regex(await ok(t, 'exec', 'c1', '--', 'cat', '/etc/hosts'), /127\.0\.1\.1 c1/);
  t.regex(await ok(t, 'network', 'list-leases', bridge, '--format', 'csv'), new RegExp(`^c1,[0-9a-f:]+,${address!.replace(/\./g, '\\.')},DYNAMIC`, 'm'));
  t.deepEqual(workDirs(), [], 'no build dir left in the data dir');
});

serial('npm run image:busybox again with the same alias moves the alias to the new image and keeps the old one, as lxc image import --alias does', async (t) => {
  const before = (await ok(t, 'image', 'list', 'busybox', '--format', 'csv', '-c', 'F')).trim().split(',')[0]!;
  const run = await imageCommand('busybox', ['--dir', d.dir, '--alias', 'busybox']);
  t.is(run.status, 0, run.stderr);
  const after = run.stdout.match(/done: busybox is ([0-9a-f]{64})/)?.[1];
  t.truthy(after);
  t.not(after, before);
  t.true(run.stdout.includes(`the alias busybox moved from ${before.slice(0, 12)}`), run.stdout);
  t.is((await ok(t, 'image', 'alias', 'list', '--format', 'csv')).trim().split('\n').filter((l) => l.startsWith('busybox,'))[0]!.split(',')[1], after!.slice(0, 12));
  t.true((await fingerprints()).includes(before), 'the image the alias named before stays');
  await ok(t, 'image', 'delete', before);
});

serial('image:busybox without a running daemon: a clear message and exit 1, before anything is built', async (t) => {
  const empty = mkdtempSync(path.join(tmpdir(), 'corral-nodaemon-'));
  try {
    const run = await imageCommand('busybox', ['--dir', empty]);
    t.is(run.status, 1);
    t.regex(run.stderr, new RegExp(`the daemon is not running: nothing answers on ${empty}/unix\\.socket`));
    t.false(run.stdout.includes('building'), run.stdout);
    t.deepEqual(readdirSync(empty), []);
  } finally {
    rmSync(empty, { recursive: true, force: true });
  }
});

serial('image command with bad arguments: the usage, exit 2, nothing imported', async (t) => {
  const before = await fingerprints();
  for (const [kind, args, message] of [
    ['busybox', ['--alias'], /--alias needs a value/],
    ['busybox', ['--dir', d.dir, '--release', 'bookworm'], /unknown argument "--release" for the busybox image/],
    ['busybox', ['--dir', d.dir, '--colour'], /unknown argument "--colour"/],
    ['debian', ['--dir', d.dir, '--mirror', 'ftp.example'], /--mirror must be an http:\/\/, https:\/\/ or file:\/\/ URL/],
    ['debian', ['--dir', d.dir, '--release', '../etc'], /"\.\.\/etc" is not a Debian release name/],
  ] as const) {
    const run = await imageCommand(kind, [...args]);
    t.is(run.status, 2, `${kind} ${args.join(' ')}: ${run.stdout}${run.stderr}`);
    t.regex(run.stderr, message);
    t.regex(run.stderr, /Usage: corrald image busybox/);
  }
  t.deepEqual(await fingerprints(), before);
});

withDebootstrap('image:debian with an unreachable mirror: a clear message naming it, exit 1, no image, no build dir, no cached packages', async (t) => {
  const before = await fingerprints();
  const run = await imageCommand('debian', ['--dir', d.dir, '--mirror', 'http://127.0.0.1:9/debian']);
  t.is(run.status, 1, run.stdout);
  t.regex(run.stderr, /cannot reach the Debian mirror http:\/\/127\.0\.0\.1:9\/debian \(ECONNREFUSED\)/);
  t.deepEqual(await fingerprints(), before);
  t.deepEqual(workDirs(), []);
  const cache = path.join(d.dir, 'image-cache');
  t.deepEqual(existsSync(cache) ? readdirSync(cache) : [], []);
});

serial('image:busybox with an alias the daemon refuses: its message, exit 1, and the image just imported is taken out again', async (t) => {
  const before = await fingerprints();
  const run = await imageCommand('busybox', ['--dir', d.dir, '--alias', 'two words']);
  t.is(run.status, 1, run.stdout);
  t.regex(run.stderr, /naming the image two words: .*two words/);
  t.true(run.stdout.includes('uploading: 100%'), 'the refusal came after the import');
  t.deepEqual(await fingerprints(), before, 'no unnamed image left behind');
});
