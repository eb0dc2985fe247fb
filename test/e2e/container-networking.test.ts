/**
 * The headline check for networking, through the real `lxc` client: two busybox containers
 * launched on a managed bridge (`lxc launch bb c -n br`) get leases from its dnsmasq with busybox
 * udhcpc, `lxc network list-leases` shows them, each pings the bridge address and the other
 * container; a network forward maps an address of the bridge to busybox nc in one of them. All
 * traffic stays on the bridge the test makes.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { rmSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startWithPool, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { lxc, lxcEnv, lxcOk } from '../helpers/clients.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { sh, uniqueName } from '../helpers/netns.js';

let d: Daemon;
let image: BusyboxImage;
const work = mkdtempSync(path.join(tmpdir(), 'corral-nete2e-'));
const bridge = uniqueName();
const ok = (t: any, ...args: string[]) => lxcOk(t, d.socket, ...args);

// udhcpc hands the lease to a script; busybox ships none, so the test brings one that sets the address.
const DHCP_SCRIPT = '#!/bin/sh\n[ "$1" = bound ] || [ "$1" = renew ] || exit 0\nip addr add "$ip/$mask" dev "$interface"\n';

test.before(async () => {
  image = buildBusyboxImage('gzip');
  d = await startWithPool({ plugins: 'full' });
  const imported = await lxc(d.socket, 'image', 'import', image.unified, '--alias', 'bb');
  if (imported.status !== 0) throw new Error(`image import failed: ${imported.stderr}`);
  writeFileSync(path.join(work, 'dhcp.sh'), DHCP_SCRIPT, { mode: 0o755 });
});

test.after.always(async () => {
  for (const c of ['n1', 'n2']) await lxc(d.socket, 'delete', '--force', c).catch(() => undefined);
  await lxc(d.socket, 'network', 'delete', bridge).catch(() => undefined);
  await stopDaemons();
  rmSync(image.dir, { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
});

test.serial('lxc launch -n on a managed bridge: udhcpc leases shown by list-leases, pings to the bridge and between containers, a forward into one of them', async (t) => {
  await ok(t, 'network', 'create', bridge, 'ipv4.address=auto', 'ipv6.address=none');
  const gateway = (await ok(t, 'network', 'get', bridge, 'ipv4.address')).trim().split('/')[0]!;
  t.regex(gateway, /^\d+\.\d+\.\d+\.1$/);

  const addresses: Record<string, string> = {};
  for (const c of ['n1', 'n2']) {
    await ok(t, 'launch', 'bb', c, '-n', bridge);
    await ok(t, 'file', 'push', path.join(work, 'dhcp.sh'), `${c}/bin/dhcp.sh`, '--mode', '0755');
    const lease = await ok(t, 'exec', c, '--', 'udhcpc', '-i', 'eth0', '-n', '-q', '-t', '5', '-s', '/bin/dhcp.sh');
    const shown = (await ok(t, 'exec', c, '--', 'ip', '-4', '-o', 'addr', 'show', 'eth0')).match(/inet (\d+\.\d+\.\d+\.\d+)\//);
    t.truthy(shown, `${c} has an IPv4 address after udhcpc: ${lease}`);
    addresses[c] = shown![1]!;
    t.is(addresses[c]!.split('.').slice(0, 3).join('.'), gateway.split('.').slice(0, 3).join('.'), 'the lease is in the bridge subnet');
  }

  const leases = await ok(t, 'network', 'list-leases', bridge, '--format', 'csv');
  for (const c of ['n1', 'n2']) t.regex(leases, new RegExp(`^${c},[0-9a-f:]+,${addresses[c]!.replace(/\./g, '\\.')},DYNAMIC`, 'm'), leases);

  await ok(t, 'exec', 'n1', '--', 'ping', '-c', '2', '-W', '3', gateway);
  await ok(t, 'exec', 'n1', '--', 'ping', '-c', '2', '-W', '3', addresses.n2!);
  await ok(t, 'exec', 'n2', '--', 'ping', '-c', '2', '-W', '3', addresses.n1!);

  const info = await ok(t, 'list', '--format', 'csv', '-c', 'n4');
  for (const c of ['n1', 'n2']) t.true(info.includes(addresses[c]!), `lxc list shows ${c}'s address: ${info}`);

  // A forward: an address of the bridge subnet, port 80, reaches port 8080 of n1.
  const listen = `${gateway.split('.').slice(0, 3).join('.')}.250`;
  await ok(t, 'network', 'forward', 'create', bridge, listen);
  await ok(t, 'network', 'forward', 'port', 'add', bridge, listen, 'tcp', '80', addresses.n1!, '8080');
  const server = spawn('lxc', ['exec', 'n1', '--', 'sh', '-c', 'echo through the forward | nc -l -p 8080'], { env: lxcEnv(d.socket), stdio: 'ignore' });
  try {
    let answer = '';
    for (let i = 0; i < 20 && !answer; i++) {
      answer = sh('busybox', ['nc', '-w', '3', listen, '80'], '').stdout;
      if (!answer) await new Promise((r) => setTimeout(r, 200));
    }
    t.is(answer, 'through the forward\n');
  } finally {
    server.kill();
  }
  t.regex(await ok(t, 'network', 'forward', 'list', bridge, '--format', 'csv'), new RegExp(listen.replace(/\./g, '\\.')));
  await ok(t, 'network', 'forward', 'delete', bridge, listen);
});
