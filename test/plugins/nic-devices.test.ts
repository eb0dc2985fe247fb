/**
 * NIC devices on real containers of a real daemon (edge set): p2p, bridged on a bridge the test
 * makes, macvlan on a veth pair, routed, physical; hot-plug and hot-unplug; volatile keys; bad
 * input. All traffic stays on interfaces this test creates.
 */
import test from 'ava';
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Daemon } from '../helpers/daemon.js';
import { claimsNamed } from '../helpers/claims.js';
import { nicTable } from '../../plugins/nic-devices/filtering.js';
import { startWithImage, stopImageDaemons } from '../helpers/image-daemon.js';
import { callAndWait } from '../helpers/api.js';
import { linksRelatedTo } from '../helpers/netns.js';

const RUN = randomBytes(3).toString('hex');
let d: Daemon;
const links: string[] = [];

const call = (method: string, url: string, body?: unknown) => callAndWait(d, method, url, body);
const hostLink = (name: string) => existsSync(`/sys/class/net/${name}`);
const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });

/** Run a shell command inside the container (its own busybox). */
function inside(name: string, script: string): { code: number; out: string } {
  const r = spawnSync('lxc-attach', ['-n', name, '-P', path.join(d.dir, 'containers'), '--clear-env', '--', '/bin/sh', '-c', script], { encoding: 'utf8', timeout: 20000 });
  return { code: r.status ?? -1, out: `${r.stdout}${r.stderr}` };
}

async function launch(name: string, devices: Record<string, Record<string, string>> = {}): Promise<void> {
  const res = await call('POST', '/1.0/instances', { name, source: { type: 'image', alias: 'bb' }, devices });
  if (res.op?.status !== 'Success') throw new Error(`create ${name}: ${res.op?.err ?? res.body}`);
  const started = await call('PUT', `/1.0/instances/${name}/state`, { action: 'start' });
  if (started.op?.status !== 'Success') throw new Error(`start ${name}: ${started.op?.err ?? started.body}`);
}

async function remove(name: string): Promise<void> {
  await call('PUT', `/1.0/instances/${name}/state`, { action: 'stop', force: true });
  await call('DELETE', `/1.0/instances/${name}`);
}

/** PUT (an operation) or PATCH (synchronous) of an instance: '' when it succeeded, else its error. */
async function edit(method: 'PUT' | 'PATCH', name: string, body: unknown): Promise<string> {
  const res = await call(method, `/1.0/instances/${name}`, body);
  if (res.status >= 400) return res.json?.error ?? res.body;
  if (!res.op) return '';
  return res.op?.status === 'Success' ? '' : String(res.op?.err ?? res.body);
}

const config = async (name: string) => (await d.request('GET', `/1.0/instances/${name}`)).json.metadata;
const network = async (name: string) => (await d.request('GET', `/1.0/instances/${name}/state`)).json.metadata.network;

test.before(async () => {
  d = await startWithImage();
});

test.after.always(async () => {
  await stopImageDaemons();
  for (const l of links) spawnSync('ip', ['link', 'del', l], { stdio: 'ignore' });
});

test.serial('a p2p NIC: the container gets it with its MAC and MTU, and reaches the host end', async (t) => {
  const hostName = `cp${RUN}`;
  links.push(hostName);
  await launch('p2p', { eth0: { type: 'nic', nictype: 'p2p', host_name: hostName, mtu: '1400' } });
  const cfg = await config('p2p');
  const hwaddr = cfg.config['volatile.eth0.hwaddr'];
  t.regex(hwaddr, /^00:16:3e(:[0-9a-f]{2}){3}$/);
  t.is(cfg.config['volatile.eth0.host_name'], hostName);
  const net = await network('p2p');
  t.is(net.eth0.hwaddr, hwaddr);
  t.is(net.eth0.mtu, 1400);
  t.is(net.eth0.host_name, hostName);
  t.is(net.eth0.state, 'up');
  t.is(net.eth0.type, 'broadcast');
  t.true(hostLink(hostName));
  ip('addr', 'add', '10.177.0.1/24', 'dev', hostName);
  t.is(inside('p2p', 'ip addr add 10.177.0.2/24 dev eth0').code, 0);
  const ping = inside('p2p', 'ping -c 3 -i 0.2 -W 3 10.177.0.1');
  t.is(ping.code, 0, ping.out);
  // The address set inside shows in the state.
  t.true((await network('p2p')).eth0.addresses.some((a: any) => a.family === 'inet' && a.address === '10.177.0.2' && a.netmask === '24'));
  t.true((await network('p2p')).eth0.counters.packets_received > 0);

  await call('PUT', '/1.0/instances/p2p/state', { action: 'stop', force: true });
  const after = (await config('p2p')).config;
  t.is(after['volatile.eth0.hwaddr'], hwaddr, 'the MAC address is kept');
  t.is(after['volatile.eth0.host_name'], undefined, 'the host name is cleared');
  t.false(hostLink(hostName));
  // Started again, the same MAC address.
  await call('PUT', '/1.0/instances/p2p/state', { action: 'start' });
  t.is((await network('p2p')).eth0.hwaddr, hwaddr);
  // A copy gets a MAC address of its own.
  const copy = await call('POST', '/1.0/instances', { name: 'p2p-copy', source: { type: 'copy', source: 'p2p' } });
  t.is(copy.op?.status, 'Success', copy.op?.err);
  t.is(await edit('PATCH', 'p2p-copy', { devices: { eth0: { type: 'nic', nictype: 'p2p' } } }), '');
  t.is((await call('PUT', '/1.0/instances/p2p-copy/state', { action: 'start' })).op?.status, 'Success');
  const copyMac = (await config('p2p-copy')).config['volatile.eth0.hwaddr'];
  t.regex(copyMac, /^00:16:3e/);
  t.not(copyMac, hwaddr);
  await remove('p2p-copy');
  await remove('p2p');
});

test.serial('volatile keys: a NIC gets its MAC address and name when added, loses them when removed, keeps them across starts', async (t) => {
  const res = await call('POST', '/1.0/instances', { name: 'vk', source: { type: 'image', alias: 'bb' }, devices: { eth0: { type: 'nic', nictype: 'p2p' } } });
  t.is(res.op?.status, 'Success', res.op?.err);
  let cfg = (await config('vk')).config;
  t.regex(cfg['volatile.eth0.hwaddr'], /^00:16:3e(:[0-9a-f]{2}){3}$/);
  t.is(cfg['volatile.eth0.name'], 'eth0');
  t.is(cfg['volatile.eth0.host_name'], undefined);
  t.is(await edit('PATCH', 'vk', { devices: { net1: { type: 'nic', nictype: 'p2p' } } }), '');
  cfg = (await config('vk')).config;
  t.regex(cfg['volatile.net1.hwaddr'], /^00:16:3e/);
  t.is(cfg['volatile.net1.name'], 'eth1', 'the next free name');
  const mac = cfg['volatile.net1.hwaddr'];
  // An option change keeps the MAC address; a removal drops the keys.
  t.is(await edit('PATCH', 'vk', { devices: { net1: { type: 'nic', nictype: 'p2p', mtu: '1400' } } }), '');
  t.is((await config('vk')).config['volatile.net1.hwaddr'], mac);
  await call('PUT', '/1.0/instances/vk/state', { action: 'start' });
  const net = await network('vk');
  t.is(net.eth1.hwaddr, mac);
  t.is(net.eth1.mtu, 1400);
  t.is(net.eth0.hwaddr, cfg['volatile.eth0.hwaddr']);
  const body = (await d.request('GET', '/1.0/instances/vk')).json.metadata;
  delete body.devices.net1;
  t.is(await edit('PUT', 'vk', body), '');
  cfg = (await config('vk')).config;
  t.deepEqual(Object.keys(cfg).filter((k) => k.startsWith('volatile.net1.')), []);
  t.is((await network('vk')).eth1, undefined);
  await remove('vk');
});

test.serial('a bridged NIC on an unmanaged bridge: MAC, MTU, reaching the bridge, MAC filtering, port isolation (instance_nic_bridged_port_isolation)', async (t) => {
  const bridge = `cbr${RUN}`;
  links.push(bridge);
  ip('link', 'add', bridge, 'type', 'bridge');
  ip('addr', 'add', '10.178.0.1/24', 'dev', bridge);
  ip('link', 'set', bridge, 'up');
  const hw = '00:16:3e:12:34:56';
  await launch('brd', { eth0: { type: 'nic', nictype: 'bridged', parent: bridge, hwaddr: hw, mtu: '1450', 'security.mac_filtering': 'true', 'security.port_isolation': 'true' } });
  const net = await network('brd');
  t.is(net.eth0.hwaddr, hw);
  t.is(net.eth0.mtu, 1450);
  const hostName = (await config('brd')).config['volatile.eth0.host_name'];
  t.regex(hostName, /^veth[0-9a-f]{8}$/);
  t.is(readFileSync(`/sys/class/net/${hostName}/master/ifindex`, 'utf8'), readFileSync(`/sys/class/net/${bridge}/ifindex`, 'utf8'), 'the host end is a port of the bridge');
  t.regex(execFileSync('bridge', ['-d', 'link', 'show', 'dev', hostName], { encoding: 'utf8' }), /isolated on/);
  t.is(inside('brd', 'ip addr add 10.178.0.2/24 dev eth0').code, 0);
  const ping = inside('brd', 'ping -c 3 -i 0.2 -W 3 10.178.0.1');
  t.is(ping.code, 0, ping.out);
  // Another MAC address inside: the bridge port drops its frames.
  t.is(inside('brd', 'ip link set eth0 address 00:16:3e:99:99:99').code, 0);
  t.not(inside('brd', 'ping -c 1 -W 2 10.178.0.1').code, 0, 'a spoofed MAC address gets nowhere');
  t.is(inside('brd', `ip link set eth0 address ${hw}`).code, 0);
  t.is(inside('brd', 'ping -c 3 -i 0.2 -W 3 10.178.0.1').code, 0);
  t.regex(execFileSync('/usr/sbin/nft', ['list', 'table', 'bridge', nicTable(d.dir)], { encoding: 'utf8' }), new RegExp(hostName));
  await call('PUT', '/1.0/instances/brd/state', { action: 'stop', force: true });
  t.notRegex(spawnSync('/usr/sbin/nft', ['list', 'table', 'bridge', nicTable(d.dir)], { encoding: 'utf8' }).stdout, new RegExp(hostName), 'the filter went with the NIC');
  t.not(spawnSync('/usr/sbin/nft', ['list', 'table', 'bridge', nicTable(d.dir)]).status, 0, 'and the table with its last filter');
  await remove('brd');
});

test.serial('hot-plug and hot-unplug of NICs on a running container', async (t) => {
  await launch('hot');
  t.deepEqual(Object.keys(await network('hot')), ['lo']);
  t.is(await edit('PATCH', 'hot', { devices: { eth1: { type: 'nic', nictype: 'p2p', name: 'eth1', mtu: '1300' } } }), '');
  const cfg = (await config('hot')).config;
  const hostName = cfg['volatile.eth1.host_name'];
  t.truthy(hostName);
  t.true(hostLink(hostName));
  const net = await network('hot');
  t.is(net.eth1.hwaddr, cfg['volatile.eth1.hwaddr']);
  t.is(net.eth1.mtu, 1300);
  t.is(net.eth1.state, 'up');
  t.is(net.eth1.host_name, hostName);
  ip('addr', 'add', '10.179.0.1/24', 'dev', hostName);
  t.is(inside('hot', 'ip addr add 10.179.0.2/24 dev eth1 && ping -c 3 -i 0.2 -W 3 10.179.0.1').code, 0);
  // A second one without a name gets the first free ethN.
  t.is(await edit('PATCH', 'hot', { devices: { eth1: { type: 'nic', nictype: 'p2p', name: 'eth1', mtu: '1300' }, net2: { type: 'nic', nictype: 'p2p' } } }), '');
  t.is((await config('hot')).config['volatile.net2.name'], 'eth0');
  t.truthy((await network('hot')).eth0);

  const put = await d.request('GET', '/1.0/instances/hot');
  const body = put.json.metadata;
  delete body.devices.eth1;
  delete body.devices.net2;
  t.is(await edit('PUT', 'hot', body), '');
  t.deepEqual(Object.keys(await network('hot')), ['lo']);
  t.false(hostLink(hostName));
  t.is((await config('hot')).config['volatile.eth1.host_name'], undefined);
  await remove('hot');
});

test.serial('NICs from a profile: plugged when the profile is applied or edited, unplugged when it drops them', async (t) => {
  await launch('prof');
  t.is((await call('POST', '/1.0/profiles', { name: `np${RUN}`, devices: { pn: { type: 'nic', nictype: 'p2p', name: 'eth3' } } })).status, 200);
  t.is(await edit('PATCH', 'prof', { profiles: ['default', `np${RUN}`] }), '');
  t.truthy((await network('prof')).eth3, 'applying the profile plugged its NIC');
  const host = (await config('prof')).config['volatile.pn.host_name'];
  t.true(hostLink(host));
  // The profile edited: the NIC follows (its MTU changes, so it is plugged again).
  const put = await call('PUT', `/1.0/profiles/np${RUN}`, { config: {}, description: '', devices: { pn: { type: 'nic', nictype: 'p2p', name: 'eth3', mtu: '1280' } } });
  t.is(put.status, 200, put.body);
  t.is((await network('prof')).eth3?.mtu, 1280);
  const dropped = await call('PUT', `/1.0/profiles/np${RUN}`, { config: {}, description: '', devices: {} });
  t.is(dropped.status, 200, dropped.body);
  t.is((await network('prof')).eth3, undefined);
  t.false(hostLink((await config('prof')).config['volatile.pn.host_name'] ?? host));
  // A profile NIC that cannot be plugged (its parent is missing) refuses the profile edit whole.
  const bad = await call('PUT', `/1.0/profiles/np${RUN}`, { config: {}, description: '', devices: { pn: { type: 'nic', nictype: 'macvlan', parent: `gone${RUN}` } } });
  t.is(bad.status, 400, bad.body);
  t.deepEqual((await d.request('GET', `/1.0/profiles/np${RUN}`)).json.metadata.devices, {});
  await remove('prof');
  await call('DELETE', `/1.0/profiles/np${RUN}`);
});

test.serial('a macvlan NIC on a veth pair as the parent', async (t) => {
  const parent = `cmp${RUN}`;
  const peer = `cmq${RUN}`;
  links.push(parent);
  ip('link', 'add', parent, 'type', 'veth', 'peer', 'name', peer);
  ip('link', 'set', parent, 'up');
  ip('addr', 'add', '10.180.0.1/24', 'dev', peer);
  ip('link', 'set', peer, 'up');
  await launch('mv', { eth0: { type: 'nic', nictype: 'macvlan', parent } });
  const hw = (await config('mv')).config['volatile.eth0.hwaddr'];
  t.is((await network('mv')).eth0.hwaddr, hw);
  const ping = inside('mv', 'ip addr add 10.180.0.2/24 dev eth0 && ping -c 3 -i 0.2 -W 3 10.180.0.1');
  t.is(ping.code, 0, ping.out);
  // Hot-plugged too.
  t.is(await edit('PATCH', 'mv', { devices: { eth1: { type: 'nic', nictype: 'macvlan', parent, name: 'eth1' } } }), '');
  const eth1 = (await network('mv')).eth1;
  t.is(eth1.hwaddr, (await config('mv')).config['volatile.eth1.hwaddr']);
  t.not(eth1.hwaddr, hw);
  // This kernel has no 8021q module: a VLAN is refused clearly and leaves nothing.
  t.regex(await edit('PATCH', 'mv', { devices: { eth2: { type: 'nic', nictype: 'macvlan', parent, vlan: '42', name: 'eth2' } } }), /8021q/);
  t.false(hostLink(`${parent}.42`));
  t.is((await network('mv')).eth2, undefined);
  await remove('mv');
});

test.serial('a routed NIC is reachable from the host, its gateway the host end (container_nic_routed, container_nic_routed_gateway)', async (t) => {
  await launch('rt', { eth0: { type: 'nic', nictype: 'routed', 'ipv4.address': '10.181.0.5', 'ipv6.address': 'fd42:181::5' } });
  const hostName = (await config('rt')).config['volatile.eth0.host_name'];
  t.true(hostLink(hostName));
  t.regex(execFileSync('ip', ['-4', 'route', 'show', '10.181.0.5'], { encoding: 'utf8' }), new RegExp(`dev ${hostName}`));
  t.regex(execFileSync('ip', ['-4', 'addr', 'show', 'dev', hostName], { encoding: 'utf8' }), /169\.254\.0\.1\/32/);
  const routes = inside('rt', 'ip -4 route; ip -6 route');
  t.regex(routes.out, /default via 169\.254\.0\.1/);
  t.regex(routes.out, /default via fe80::1/);
  const ping = spawnSync('busybox', ['ping', '-c', '3', '-i', '0.2', '-W', '3', '10.181.0.5'], { encoding: 'utf8' });
  t.is(ping.status, 0, ping.stdout + ping.stderr);
  const addrs = (await network('rt')).eth0.addresses;
  t.true(addrs.some((a: any) => a.address === '10.181.0.5' && a.netmask === '32'));
  t.true(addrs.some((a: any) => a.address === 'fd42:181::5'));
  await call('PUT', '/1.0/instances/rt/state', { action: 'stop', force: true });
  t.is(execFileSync('ip', ['-4', 'route', 'show', '10.181.0.5'], { encoding: 'utf8' }).trim(), '', 'the host route went with the NIC');
  await remove('rt');
});

test.serial('routed NIC options: no gateway (container_nic_routed_gateway), host address (container_nic_routed_host_address), host table (container_nic_routed_host_table), ingress limit; p2p routes (container_nic_routes)', async (t) => {
  await launch('rto', {
    eth0: {
      type: 'nic', nictype: 'routed', 'ipv4.address': '10.185.0.5', 'ipv4.gateway': 'none', 'ipv4.host_address': '169.254.0.9',
      'ipv4.host_table': '1185', 'limits.ingress': '10Mbit',
    },
    eth1: { type: 'nic', nictype: 'p2p', name: 'eth1', 'ipv4.routes': '10.186.0.0/24' },
  });
  const cfg = (await config('rto')).config;
  const host0 = cfg['volatile.eth0.host_name'];
  const host1 = cfg['volatile.eth1.host_name'];
  t.notRegex(inside('rto', 'ip -4 route').out, /default/, 'ipv4.gateway=none: no default route');
  t.regex(execFileSync('ip', ['-4', 'addr', 'show', 'dev', host0], { encoding: 'utf8' }), /169\.254\.0\.9\/32/);
  t.regex(execFileSync('ip', ['-4', 'route', 'show', 'table', '1185'], { encoding: 'utf8' }), new RegExp(`10\\.185\\.0\\.5 dev ${host0}`));
  t.is(execFileSync('ip', ['-4', 'route', 'show', '10.185.0.5'], { encoding: 'utf8' }).trim(), '', 'not in the main table');
  const qdiscs = execFileSync('tc', ['qdisc', 'show', 'dev', host0], { encoding: 'utf8' });
  t.regex(qdiscs, /qdisc htb 1: root/);
  t.regex(execFileSync('tc', ['class', 'show', 'dev', host0], { encoding: 'utf8' }), /rate 10Mbit/);
  t.regex(execFileSync('ip', ['-4', 'route', 'show', '10.186.0.0/24'], { encoding: 'utf8' }), new RegExp(`dev ${host1}`));
  // This kernel has no tc police action: an egress limit is refused clearly and the hot-plug leaves nothing.
  const before = { host: linksRelatedTo({ peerOf: host0 }), inside: inside('rto', 'ip -o link').out };
  t.regex(await edit('PATCH', 'rto', { devices: { eth2: { type: 'nic', nictype: 'p2p', name: 'eth2', 'limits.egress': '5Mbit' } } }), /no tc police action/);
  t.deepEqual({ host: linksRelatedTo({ peerOf: host0 }), inside: inside('rto', 'ip -o link').out }, before);
  t.is((await network('rto')).eth2, undefined);
  await call('PUT', '/1.0/instances/rto/state', { action: 'stop', force: true });
  t.is(execFileSync('ip', ['-4', 'route', 'show', 'table', '1185'], { encoding: 'utf8' }).trim(), '', 'the host table route went with the NIC');
  await remove('rto');
});

test.serial('bridged NIC VLANs are refused where the kernel has no bridge VLAN filtering', async (t) => {
  const bridge = `cbv${RUN}`;
  links.push(bridge);
  ip('link', 'add', bridge, 'type', 'bridge');
  const res = await call('POST', '/1.0/instances', { name: 'vl', source: { type: 'image', alias: 'bb' }, devices: { eth0: { type: 'nic', nictype: 'bridged', parent: bridge, vlan: '10' } } });
  t.is(res.status, 400);
  t.regex(res.json.error, /not supported here.*VLAN filtering/);
  t.is((await d.request('GET', '/1.0/instances/vl')).status, 404);
  // limits.max shapes what goes into the instance; its egress half needs the police action too.
  await launch('vl', { eth0: { type: 'nic', nictype: 'bridged', parent: bridge, 'limits.ingress': '20Mbit' } });
  const port = (await config('vl')).config['volatile.eth0.host_name'];
  t.regex(execFileSync('tc', ['class', 'show', 'dev', port], { encoding: 'utf8' }), /rate 20Mbit/);
  await remove('vl');
});

test.serial('a NIC on a managed bridge network: network=, static DHCP reservation, IPv4 filtering (instance_nic_network, container_nic_ipfilter)', async (t) => {
  const net = `cn${RUN}`;
  const made = await call('POST', '/1.0/networks', { name: net, type: 'bridge', config: { 'ipv4.address': '10.184.0.1/24', 'ipv4.nat': 'false', 'ipv6.address': 'none' } });
  t.true(made.status < 300, made.body);
  try {
    // An address outside the network's subnet is refused, and nothing starts.
    const outside = await call('POST', '/1.0/instances', { name: 'mn-bad', source: { type: 'image', alias: 'bb' }, devices: { eth0: { type: 'nic', network: net, 'ipv4.address': '10.99.0.5' } } });
    t.is(outside.op?.status ?? 'Success', 'Success', 'created (the address is checked at start)');
    const start = await call('PUT', '/1.0/instances/mn-bad/state', { action: 'start' });
    t.is(start.op?.status, 'Failure');
    t.regex(start.op?.err ?? '', /10\.99\.0\.5/);
    t.is((await d.request('GET', '/1.0/instances/mn-bad')).json.metadata.status, 'Stopped');
    await call('DELETE', '/1.0/instances/mn-bad');

    await launch('mn', { eth0: { type: 'nic', network: net, 'ipv4.address': '10.184.0.50', 'security.ipv4_filtering': 'true' } });
    const cfg = (await config('mn')).config;
    const hw = cfg['volatile.eth0.hwaddr'];
    const port = cfg['volatile.eth0.host_name'];
    t.is(readFileSync(`/sys/class/net/${port}/master/ifindex`, 'utf8'), readFileSync(`/sys/class/net/${net}/ifindex`, 'utf8'), 'attached to the network\'s bridge');
    // busybox udhcpc gets the reserved address from the network's dnsmasq (the script does nothing with it).
    const dhcp = inside('mn', 'udhcpc -i eth0 -n -q -t 5 -s /bin/true 2>&1');
    t.regex(dhcp.out, /10\.184\.0\.50/, dhcp.out);
    const usedBy = (await d.request('GET', `/1.0/networks/${net}`)).json.metadata.used_by;
    t.true(usedBy.includes('/1.0/instances/mn'));
    t.is(inside('mn', 'ip addr add 10.184.0.50/24 dev eth0').code, 0);
    t.is(inside('mn', 'ping -c 3 -i 0.2 -W 3 10.184.0.1').code, 0);
    // Another source address is dropped at the bridge port.
    t.is(inside('mn', 'ip addr del 10.184.0.50/24 dev eth0 && ip addr add 10.184.0.51/24 dev eth0').code, 0);
    t.not(inside('mn', 'ping -c 1 -W 2 10.184.0.1').code, 0, 'a spoofed IPv4 source gets nowhere');
    t.regex(execFileSync('/usr/sbin/nft', ['list', 'table', 'bridge', nicTable(d.dir)], { encoding: 'utf8' }), new RegExp(`ether saddr != ${hw}`));
    await remove('mn');
  } finally {
    await call('DELETE', `/1.0/networks/${net}`);
  }
});

test.serial('a physical NIC moves in and comes back at stop and at hot-unplug', async (t) => {
  const phys = `cph${RUN}`;
  const peer = `cpi${RUN}`;
  links.push(phys);
  ip('link', 'add', phys, 'mtu', '1500', 'type', 'veth', 'peer', 'name', peer);
  await launch('ph', { eth0: { type: 'nic', nictype: 'physical', parent: phys, mtu: '1280' } });
  t.false(hostLink(phys), 'the interface left the host');
  t.is((await network('ph')).eth0.mtu, 1280);
  await call('PUT', '/1.0/instances/ph/state', { action: 'stop', force: true });
  t.true(hostLink(phys), 'back under its own name');
  t.is(readFileSync(`/sys/class/net/${phys}/mtu`, 'utf8').trim(), '1500', 'with its own MTU');
  // Hot-plugged and unplugged.
  const body = (await d.request('GET', '/1.0/instances/ph')).json.metadata;
  delete body.devices.eth0;
  t.is(await edit('PUT', 'ph', body), '');
  await call('PUT', '/1.0/instances/ph/state', { action: 'start' });
  t.is(await edit('PATCH', 'ph', { devices: { eth3: { type: 'nic', nictype: 'physical', parent: phys, name: 'eth3' } } }), '');
  t.false(hostLink(phys));
  t.truthy((await network('ph')).eth3);
  const again = (await d.request('GET', '/1.0/instances/ph')).json.metadata;
  delete again.devices.eth3;
  t.is(await edit('PUT', 'ph', again), '');
  t.true(hostLink(phys));
  await remove('ph');
});

test.serial('bad NIC input: clear 400s and nothing created', async (t) => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ type: 'nic', nictype: 'bridged', parent: `nosuch${RUN}` }, /does not exist/],
    [{ type: 'nic', nictype: 'p2p', hwaddr: 'zz:zz' }, /MAC address/],
    [{ type: 'nic', nictype: 'p2p', host_name: 'a-very-long-host-name' }, /1 to 15 characters/],
    [{ type: 'nic', nictype: 'ipvlan', parent: 'lo' }, /not supported here.*ipvlan/],
    [{ type: 'nic', nictype: 'sriov', parent: 'lo' }, /not supported here/],
    [{ type: 'nic', nictype: 'p2p', mtu: '9' }, /MTU/],
    [{ type: 'nic', nictype: 'p2p', parent: 'lo' }, /"parent" is not valid/],
    [{ type: 'nic' }, /nictype/],
    [{ type: 'nic', nictype: 'warp' }, /unknown nictype/],
    [{ type: 'nic', nictype: 'routed', 'ipv4.address': '10.0.0.300' }, /IPv4/],
    [{ type: 'nic', nictype: 'bridged', parent: 'lo' }, /not a bridge/],
    [{ type: 'nic', network: `nosuch${RUN}` }, /network "nosuch\w+".*not found/i],
    [{ type: 'nic', network: 'x', nictype: 'p2p' }, /cannot be used together/],
  ];
  for (const [device, message] of cases) {
    const res = await call('POST', '/1.0/instances', { name: 'bad', source: { type: 'image', alias: 'bb' }, devices: { eth0: device } });
    t.is(res.status, 400, JSON.stringify(device));
    t.regex(res.json.error, message, JSON.stringify(device));
    t.is((await d.request('GET', '/1.0/instances/bad')).status, 404);
  }
  // On an existing running instance: refused, the record and the container unchanged.
  await launch('ok');
  const before = await config('ok');
  t.regex(await edit('PATCH', 'ok', { devices: { eth0: { type: 'nic', nictype: 'p2p', host_name: 'x'.repeat(16) } } }), /1 to 15 characters/);
  t.deepEqual((await config('ok')).devices, before.devices);
  t.deepEqual(Object.keys(await network('ok')), ['lo']);
  // A host name already taken on the host: refused at hot-plug, nothing left behind.
  t.regex(await edit('PATCH', 'ok', { devices: { eth0: { type: 'nic', nictype: 'p2p', host_name: 'lo' } } }), /already exists/);
  t.deepEqual((await config('ok')).devices, before.devices);
  // Two NICs of one name: the second is refused at hot-plug.
  t.regex(await edit('PATCH', 'ok', { devices: { a: { type: 'nic', nictype: 'p2p', name: 'eth7' }, b: { type: 'nic', nictype: 'p2p', name: 'eth7' } } }), /already named "eth7"/);
  t.deepEqual(Object.keys(await network('ok')), ['lo'], 'the first one was unplugged again');
  // Static addresses need a managed network.
  const bridge = `cbs${RUN}`;
  links.push(bridge);
  ip('link', 'add', bridge, 'type', 'bridge');
  t.regex(await edit('PATCH', 'ok', { devices: { eth0: { type: 'nic', nictype: 'bridged', parent: bridge, 'ipv4.address': '10.182.0.2' } } }), /managed bridge network/);
  t.deepEqual(Object.keys(await network('ok')), ['lo']);
  await remove('ok');
});

test('every extension name nic-devices claims is named by a test that exercises it, and advertised', async (t) => {
  const { claims, unnamed } = claimsNamed('nic-devices');
  t.true(claims.length > 0);
  t.deepEqual(unnamed, []);
  const advertised: string[] = (await d.request('GET', '/1.0')).json.metadata.api_extensions;
  t.deepEqual(claims.filter((c) => !advertised.includes(c)), []);
});
