/**
 * A VM's NIC on a managed bridge the test makes, through the real `lxc` client: the driver gives
 * QEMU a tap on the bridge, the guest's udhcpc gets a lease from the bridge's dnsmasq (seen in
 * `lxc network list-leases`), `lxc info` counts the NIC's traffic, and the tap goes at stop.
 * `boot.priority` orders the bootable devices in the generated config. Nothing leaves the bridge.
 */
import test from 'ava';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { startWithPool, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { createRequire } from 'node:module';
import { lxc, lxcEnv } from '../helpers/clients.js';
import { uniqueName } from '../helpers/netns.js';
import { importTestVmImage, vmProblem } from '../helpers/vm-image.js';

const require = createRequire(import.meta.url);
const skip = vmProblem();
const vmTest = skip ? test.serial.skip : test.serial;
if (skip) console.warn(`Skipping virtual machine networking: ${skip}`);

let d: Daemon;
const bridge = uniqueName();

test.before(async () => {
  if (skip) return;
  // The KVM probe is the lifecycle test's business; here it would only take CPU from the guest.
  d = await startWithPool({ plugins: 'full', env: { CORRAL_QEMU_ACCEL: 'tcg' } });
  await importTestVmImage(d.socket, 'vm');
  const created = await lxc(d.socket, 'network', 'create', bridge, 'ipv4.address=auto', 'ipv4.nat=false', 'ipv6.address=none');
  if (created.status !== 0) throw new Error(`network create failed: ${created.stderr}`);
});

test.after.always(async () => {
  if (skip) return;
  await lxc(d.socket, 'delete', '--force', 'n1');
  await lxc(d.socket, 'network', 'delete', bridge);
  await stopDaemons();
});

vmTest('a VM on a managed bridge gets a DHCP lease through its tap; a NIC plugs in and out while it runs; the tap goes when the guest powers itself off', async (t) => {
  const launch = await lxc(d.socket, 'launch', 'vm', 'n1', '--vm', '-n', bridge, '-c', 'limits.memory=256MiB');
  t.is(launch.status, 0, launch.stderr);
  const config = (await d.request('GET', '/1.0/instances/n1')).json.metadata.config;
  const hwaddr = config['volatile.eth0.hwaddr'];
  const tap = config['volatile.eth0.host_name'];
  t.truthy(hwaddr);
  t.true(existsSync(`/sys/class/net/${bridge}/brif/${tap}`), 'the tap is on the bridge');
  t.is(readFileSync(`/sys/class/net/${tap}/tun_flags`, 'utf8').trim() !== '', true, 'it is a tap device');
  await waitFor(async () => (await lxc(d.socket, 'network', 'list-leases', bridge, '--format', 'csv')).stdout.includes(hwaddr), 90_000, 'the guest\'s DHCP lease');
  const leases = (await lxc(d.socket, 'network', 'list-leases', bridge, '--format', 'csv')).stdout;
  t.regex(leases, new RegExp(`n1,${hwaddr},[0-9.]+,DYNAMIC`));
  const info = (await lxc(d.socket, 'info', 'n1')).stdout;
  t.regex(info, new RegExp(`Host interface: ${tap}`));
  t.regex(info, /Packets sent: [1-9]/, 'the guest\'s DHCP packets are counted');

  // A second NIC plugged into the running VM (QMP device_add on a spare PCIe port), then unplugged.
  const before = (await lxc(d.socket, 'console', 'n1', '--show-log')).stdout.length;
  const plug = await lxc(d.socket, 'config', 'device', 'add', 'n1', 'eth1', 'nic', `network=${bridge}`, 'name=eth1');
  t.is(plug.status, 0, plug.stderr);
  const tap1 = (await d.request('GET', '/1.0/instances/n1')).json.metadata.config['volatile.eth1.host_name'];
  t.true(existsSync(`/sys/class/net/${bridge}/brif/${tap1}`), 'the new tap is on the bridge');
  await waitFor(async () => /virtio-pci [0-9a-f:.]+: enabling device/.test((await lxc(d.socket, 'console', 'n1', '--show-log')).stdout.slice(before)), 30_000, 'the guest seeing the new card');
  const unplug = await lxc(d.socket, 'config', 'device', 'remove', 'n1', 'eth1');
  t.is(unplug.status, 0, unplug.stderr);
  t.false(existsSync(`/sys/class/net/${tap1}`), 'the unplugged NIC\'s tap is gone');
  t.true(existsSync(`/sys/class/net/${tap}`), 'eth0 stays');

  // The root disk boots first unless a NIC asks for more.
  const conf = readFileSync(path.join(d.dir, 'qemu', 'n1', 'qemu.conf'), 'utf8');
  t.regex(conf, /\[device "dev-root"\][^[]*bootindex = "1"/);
  t.regex(conf, /\[device "dev-nic-eth0"\][^[]*bootindex = "2"/);

  // The guest powers itself off (poweroff typed on its console): the daemon sees it stopped and the tap goes.
  const term = require('node-pty').spawn('lxc', ['console', 'n1'], { cols: 100, rows: 30, env: lxcEnv(d.socket) });
  let out = '';
  term.onData((chunk: string) => (out += chunk));
  await waitFor(() => out.includes('+a q'), 10_000, 'the console client');
  await waitFor(async () => {
    term.write('echo ready-$((6*7))\r');
    await new Promise((r) => setTimeout(r, 300));
    return out.includes('ready-42');
  }, 60_000, 'the console shell');
  term.write('poweroff\r');
  await waitFor(async () => (await lxc(d.socket, 'list', 'n1', '-c', 's', '--format', 'csv')).stdout.trim() === 'STOPPED', 60_000, 'the guest to power off');
  term.kill();
  // The daemon notices within its watch interval and releases the NIC's host side (its record changes then too).
  await waitFor(async () => !existsSync(`/sys/class/net/${tap}`) && !(await d.request('GET', '/1.0/instances/n1')).json.metadata.config['volatile.eth0.host_name'], 10_000, 'the tap to go');
  t.false(existsSync(`/sys/class/net/${tap}`), 'the tap was removed');
  const prio = await lxc(d.socket, 'config', 'device', 'set', 'n1', 'eth0', 'boot.priority=10');
  t.is(prio.status, 0, prio.stderr);
  t.is((await lxc(d.socket, 'start', 'n1')).status, 0);
  const reordered = readFileSync(path.join(d.dir, 'qemu', 'n1', 'qemu.conf'), 'utf8');
  t.regex(reordered, /\[device "dev-nic-eth0"\][^[]*bootindex = "1"/, 'boot.priority puts the NIC first');
  t.regex(reordered, /\[device "dev-root"\][^[]*bootindex = "2"/);
  t.is((await lxc(d.socket, 'stop', 'n1', '--force')).status, 0);
});
