/**
 * macvlan and physical networks through the real `lxc` client: create with a parent, list, show,
 * `lxc launch bb c -n <net>`, the NIC the container gets, refusals, delete. The parents are veth
 * pairs whose other end sits in a network namespace this test makes.
 */
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Daemon } from '../helpers/daemon.js';
import { startWithImage, stopImageDaemons } from '../helpers/image-daemon.js';
import { lxc, lxcOk } from '../helpers/clients.js';
import { linkExists, VethNamespaces } from '../helpers/netns.js';

let d: Daemon;
const veths = new VethNamespaces();
const ok = (t: any, ...args: string[]) => lxcOk(t, d.socket, ...args);
const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe', encoding: 'utf8' });

test.before(async () => {
  d = await startWithImage({ plugins: 'full', importWith: 'lxc' });
});

test.after.always(async () => {
  for (const c of ['mc', 'pc']) await lxc(d.socket, 'delete', '--force', c).catch(() => undefined);
  await stopImageDaemons();
  veths.removeAll();
});

test.serial('lxc network create --type=macvlan (network_type_macvlan), lxc launch -n: a macvlan NIC that reaches the parent\'s peer; list, show, delete', async (t) => {
  const { parent } = veths.add('10.188.0.1/24');
  ip('link', 'set', parent, 'up');
  const missing = await lxc(d.socket, 'network', 'create', 'm1', '--type=macvlan', 'parent=nosuchparent9');
  t.not(missing.status, 0);
  t.regex(missing.stderr, /Parent interface "nosuchparent9" does not exist/);
  await ok(t, 'network', 'create', 'm1', '--type=macvlan', `parent=${parent}`, 'mtu=1400');
  const list = await ok(t, 'network', 'list', '--format', 'csv');
  t.regex(list, /^m1,macvlan,YES,/m);
  const shown = await ok(t, 'network', 'show', 'm1');
  t.regex(shown, new RegExp(`parent: ${parent}`));
  t.regex(shown, /type: macvlan/);
  t.regex(shown, /mtu: "1400"/);

  await ok(t, 'launch', 'bb', 'mc', '-n', 'm1');
  t.regex(await ok(t, 'config', 'device', 'show', 'mc'), /network: m1/);
  t.is((await ok(t, 'exec', 'mc', '--', 'cat', '/sys/class/net/eth0/mtu')).trim(), '1400');
  await ok(t, 'exec', 'mc', '--', 'ip', 'addr', 'add', '10.188.0.2/24', 'dev', 'eth0');
  await ok(t, 'exec', 'mc', '--', 'ping', '-c', '2', '-W', '3', '10.188.0.1');
  t.regex(await ok(t, 'network', 'show', 'm1'), /\/1\.0\/instances\/mc/);
  const inUse = await lxc(d.socket, 'network', 'delete', 'm1');
  t.not(inUse.status, 0);
  t.regex(inUse.stderr, /in use/);

  await ok(t, 'delete', '--force', 'mc');
  await ok(t, 'network', 'delete', 'm1');
  t.notRegex(await ok(t, 'network', 'list', '--format', 'csv'), /^m1,/m);
  t.true(linkExists(parent));
});

test.serial('lxc network create --type=physical (network_type_physical): one network per parent; lxc launch -n takes the parent in and stop gives it back', async (t) => {
  const { parent } = veths.add('10.189.0.1/24');
  await ok(t, 'network', 'create', 'p1', '--type=physical', `parent=${parent}`, 'mtu=1450');
  t.is(readFileSync(`/sys/class/net/${parent}/mtu`, 'utf8').trim(), '1450');
  const twice = await lxc(d.socket, 'network', 'create', 'p2', '--type=physical', `parent=${parent}`);
  t.not(twice.status, 0);
  t.regex(twice.stderr, /already used by network "p1"/);
  t.regex(await ok(t, 'network', 'list', '--format', 'csv'), /^p1,physical,YES,/m);

  await ok(t, 'launch', 'bb', 'pc', '-n', 'p1');
  t.false(linkExists(parent), 'the parent is inside the container');
  await ok(t, 'exec', 'pc', '--', 'ip', 'link', 'set', 'eth0', 'up');
  await ok(t, 'exec', 'pc', '--', 'ip', 'addr', 'add', '10.189.0.2/24', 'dev', 'eth0');
  await ok(t, 'exec', 'pc', '--', 'ping', '-c', '2', '-W', '3', '10.189.0.1');
  await ok(t, 'stop', '--force', 'pc');
  t.true(linkExists(parent), 'back on the host');
  await ok(t, 'delete', 'pc');
  await ok(t, 'network', 'delete', 'p1');
  t.is(readFileSync(`/sys/class/net/${parent}/mtu`, 'utf8').trim(), '1500');
});
