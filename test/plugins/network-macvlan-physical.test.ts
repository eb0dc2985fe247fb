/**
 * macvlan and physical networks on a real daemon (full set) with real containers: their keys and
 * refusals, what they leave on the host (nothing, but a physical network's MTU), NICs with
 * `network=` becoming macvlan interfaces on the parent or taking the parent in. The parents are
 * veth pairs whose other end sits in a network namespace this test makes: traffic stays there.
 */
import test from 'ava';
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Daemon } from '../helpers/daemon.js';
import { startWithImage, stopImageDaemons } from '../helpers/image-daemon.js';
import { callAndWait } from '../helpers/api.js';
import { linkExists, linksRelatedTo, uniqueName, VethNamespaces } from '../helpers/netns.js';

let d: Daemon;
const veths = new VethNamespaces();

const call = (method: string, url: string, body?: unknown) => callAndWait(d, method, url, body);
const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe', encoding: 'utf8' });
const mtuOf = (iface: string) => readFileSync(`/sys/class/net/${iface}/mtu`, 'utf8').trim();

function inside(name: string, script: string): { code: number; out: string } {
  const r = spawnSync('lxc-attach', ['-n', name, '-P', path.join(d.dir, 'containers'), '--clear-env', '--', '/bin/sh', '-c', script], { encoding: 'utf8', timeout: 20000 });
  return { code: r.status ?? -1, out: `${r.stdout}${r.stderr}` };
}

const createNetwork = (name: string, type: string, config: Record<string, string>) => d.request('POST', '/1.0/networks', { name, type, config });
const getNetwork = async (name: string) => (await d.request('GET', `/1.0/networks/${name}`)).json;

async function launch(name: string, devices: Record<string, Record<string, string>>): Promise<string> {
  const res = await call('POST', '/1.0/instances', { name, source: { type: 'image', alias: 'bb' }, devices });
  if (res.op?.status !== 'Success') return String(res.op?.err ?? res.json?.error ?? res.body);
  const started = await call('PUT', `/1.0/instances/${name}/state`, { action: 'start' });
  return started.op?.status === 'Success' ? '' : String(started.op?.err ?? started.json?.error ?? started.body);
}

async function remove(name: string): Promise<void> {
  await call('PUT', `/1.0/instances/${name}/state`, { action: 'stop', force: true });
  await call('DELETE', `/1.0/instances/${name}`);
}

/** The container's eth0 as the host's iproute2 sees it from inside its network namespace. */
async function linkInside(name: string, iface: string): Promise<any> {
  const pid = (await d.request('GET', `/1.0/instances/${name}/state`)).json.metadata.pid;
  const out = execFileSync('nsenter', ['-t', String(pid), '-n', 'ip', '-j', '-d', 'link', 'show', 'dev', iface], { encoding: 'utf8' });
  return JSON.parse(out)[0];
}

test.before(async () => {
  d = await startWithImage({ plugins: 'full' });
});

test.after.always(async () => {
  await stopImageDaemons();
  veths.removeAll();
});

test.serial('macvlan networks (network_type_macvlan): keys checked, bad ones refused with nothing recorded, nothing made on the host', async (t) => {
  const { parent } = veths.add('10.183.0.1/24');
  const bad: [Record<string, string>, RegExp][] = [
    [{}, /needs a "parent"/],
    [{ parent: `nosuch${uniqueName()}`.slice(0, 15) }, /does not exist/],
    [{ parent, mtu: '1000' }, /MTU 1000 is out of range/],
    [{ parent, mtu: 'big' }, /not an MTU/],
    [{ parent, vlan: '5000' }, /VLAN ID 5000 is out of range/],
    [{ parent, gvrp: 'maybe' }, /gvrp/],
    [{ parent, 'ipv4.address': '10.0.0.1/24' }, /Invalid option "ipv4.address" for network type "macvlan"/],
    [{ parent, 'ipv4.ovn.ranges': '10.0.0.10-10.0.0.20' }, /ipv4.ovn.ranges/],
  ];
  for (const [config, message] of bad) {
    const res = await createNetwork('mbad', 'macvlan', config);
    t.is(res.status, 400, JSON.stringify(config));
    t.regex(res.json.error, message);
  }
  t.is((await d.request('GET', '/1.0/networks/mbad')).status, 404, 'nothing recorded');

  const before = linksRelatedTo({ parent });
  const made = await createNetwork('mgood', 'macvlan', { parent, mtu: '1400', vlan: '42', gvrp: 'true', 'maas.subnet.ipv4': 'lan', 'user.note': 'x' });
  t.is(made.status, 200, made.json?.error);
  t.deepEqual(linksRelatedTo({ parent }), before, 'no interface made on the parent for the network');
  t.false(linkExists('mgood'));
  const shown = await getNetwork('mgood');
  t.deepEqual(shown.metadata.config, { parent, mtu: '1400', vlan: '42', gvrp: 'true', 'maas.subnet.ipv4': 'lan', 'user.note': 'x' });
  t.is(shown.metadata.type, 'macvlan');
  t.true(shown.metadata.managed);
  t.is(shown.metadata.status, 'Created');
  // The network has no interface of its own: its state is a 404, as on the reference.
  t.is((await d.request('GET', '/1.0/networks/mgood/state')).status, 404);
  // Edits are checked the same way; gvrp goes with vlan but is accepted alone, as the reference does.
  t.is((await d.request('PATCH', '/1.0/networks/mgood', { config: { mtu: '20000' } })).status, 400);
  t.is((await d.request('PATCH', '/1.0/networks/mgood', { config: { parent: 'nosuchparent0' } })).status, 400);
  t.is((await d.request('PATCH', '/1.0/networks/mgood', { config: { vlan: '', gvrp: 'false' } })).status, 200);
  t.is((await getNetwork('mgood')).metadata.config.vlan, undefined);
  t.is((await d.request('POST', '/1.0/networks/mgood', { name: 'mgood2' })).status, 200);
  t.is((await d.request('DELETE', '/1.0/networks/mgood2')).status, 200);
});

test.serial('a container on a macvlan network (network_type_macvlan) gets a macvlan interface on the parent and pings the peer end', async (t) => {
  const { parent } = veths.add('10.184.0.1/24');
  ip('link', 'set', parent, 'up');
  t.is((await createNetwork('mv1', 'macvlan', { parent, mtu: '1400' })).status, 200);
  // The network decides parent, mtu, vlan and gvrp: the NIC may not set them.
  const refused = await call('POST', '/1.0/instances', { name: 'mvx', source: { type: 'image', alias: 'bb' }, devices: { eth0: { type: 'nic', network: 'mv1', mtu: '1300' } } });
  t.is(refused.status, 400);
  t.regex(refused.json.error, /"mtu" cannot be set on a NIC with "network"/);

  t.is(await launch('mvc', { eth0: { type: 'nic', network: 'mv1', name: 'eth0' } }), '');
  const link = await linkInside('mvc', 'eth0');
  t.is(link.linkinfo.info_kind, 'macvlan');
  t.is(link.linkinfo.info_data.mode, 'bridge');
  t.is(link.mtu, 1400, 'the network\'s MTU');
  t.is(link.link_index, Number(readFileSync(`/sys/class/net/${parent}/ifindex`, 'utf8')), 'on the network\'s parent');
  const volatile = (await d.request('GET', '/1.0/instances/mvc')).json.metadata.config;
  t.is(link.address, volatile['volatile.eth0.hwaddr']);
  const ping = inside('mvc', 'ip addr add 10.184.0.2/24 dev eth0 && ping -c 3 -i 0.2 -W 3 10.184.0.1');
  t.is(ping.code, 0, ping.out);

  // In use: listed by used_by, not renamed nor deleted.
  t.deepEqual((await getNetwork('mv1')).metadata.used_by, ['/1.0/instances/mvc']);
  t.is((await d.request('POST', '/1.0/networks/mv1', { name: 'mv9' })).status, 400);
  const del = await d.request('DELETE', '/1.0/networks/mv1');
  t.is(del.status, 400);
  t.regex(del.json.error, /in use/);

  // A VLAN needs 802.1Q, which this kernel lacks: the NIC is refused at plug time with the reason, and nothing is left.
  t.is((await createNetwork('mv2', 'macvlan', { parent, vlan: '42', gvrp: 'true' })).status, 200);
  const plug = await call('PATCH', '/1.0/instances/mvc', { devices: { eth1: { type: 'nic', network: 'mv2', name: 'eth1' } } });
  t.regex(String(plug.op?.err ?? plug.json?.error), /8021q/);
  t.false(linkExists(`${parent}.42`));
  t.is((await d.request('GET', '/1.0/instances/mvc/state')).json.metadata.network.eth1, undefined);

  await remove('mvc');
  t.deepEqual((await getNetwork('mv1')).metadata.used_by, []);
  t.is((await d.request('DELETE', '/1.0/networks/mv1')).status, 200);
  t.is((await d.request('DELETE', '/1.0/networks/mv2')).status, 200);
  t.true(linkExists(parent), 'the parent stays');
});

test.serial('physical networks (network_type_physical): one network per parent, MTU set on the parent, VLAN refused without 802.1Q, OVN uplink keys checked', async (t) => {
  const { parent } = veths.add('10.185.0.1/24');
  const bad: [Record<string, string>, RegExp][] = [
    [{ parent: 'nosuchparent1' }, /does not exist/],
    [{ parent, mtu: '70000' }, /out of range/],
    [{ parent, 'ipv4.gateway': '10.0.0.1' }, /prefix length/],
    [{ parent, 'ipv4.ovn.ranges': 'bad' }, /range/],
    [{ parent, 'ovn.ingress_mode': 'x' }, /l2proxy, routed/],
    [{ parent, 'dns.nameservers': 'bad' }, /not an IP address/],
    [{ parent, 'bridge.mtu': '1400' }, /Invalid option "bridge.mtu" for network type "physical"/],
  ];
  for (const [config, message] of bad) {
    const res = await createNetwork('pbad', 'physical', config);
    t.is(res.status, 400, JSON.stringify(config));
    t.regex(res.json.error, message);
  }
  // A VLAN interface cannot be made here: refused at creation with the reason, nothing left.
  const vlan = await createNetwork('pvl', 'physical', { parent, vlan: '10' });
  t.is(vlan.status, 400);
  t.regex(vlan.json.error, /802\.1Q/);
  t.false(linkExists(`${parent}.10`));
  t.is((await d.request('GET', '/1.0/networks/pvl')).status, 404);
  t.is(mtuOf(parent), '1500');

  const made = await createNetwork('ph1', 'physical', {
    parent, mtu: '1450', 'ipv4.gateway': '10.185.0.1/24', 'ipv4.ovn.ranges': '10.185.0.10-10.185.0.20', 'ovn.ingress_mode': 'routed', 'ipv4.routes': '10.186.0.0/24',
  });
  t.is(made.status, 200, made.json?.error);
  t.is(mtuOf(parent), '1450', 'the MTU is set on the parent');
  const twice = await createNetwork('ph2', 'physical', { parent });
  t.is(twice.status, 400);
  t.regex(twice.json.error, /already used by network "ph1"/);
  t.is((await d.request('PATCH', '/1.0/networks/ph1', { config: { mtu: '1420' } })).status, 200);
  t.is(mtuOf(parent), '1420');
  t.is((await d.request('DELETE', '/1.0/networks/ph1')).status, 200);
  t.is(mtuOf(parent), '1500', 'the parent\'s MTU is put back');
  t.true(linkExists(parent));
});

test.serial('a container on a physical network (network_type_physical) takes the parent in and gives it back on stop', async (t) => {
  const { parent } = veths.add('10.187.0.1/24');
  t.is((await createNetwork('ph3', 'physical', { parent, mtu: '1440' })).status, 200);
  const mac = readFileSync(`/sys/class/net/${parent}/address`, 'utf8').trim();
  t.is(await launch('phc', { eth0: { type: 'nic', network: 'ph3', name: 'eth0' } }), '');
  t.false(linkExists(parent), 'the parent left the host');
  const link = await linkInside('phc', 'eth0');
  t.is(link.linkinfo.info_kind, 'veth');
  t.is(link.address, mac, 'it keeps its own MAC address');
  t.is(link.mtu, 1440);
  const ping = inside('phc', 'ip link set eth0 up && ip addr add 10.187.0.2/24 dev eth0 && ping -c 3 -i 0.2 -W 3 10.187.0.1');
  t.is(ping.code, 0, ping.out);
  t.deepEqual((await getNetwork('ph3')).metadata.used_by, ['/1.0/instances/phc']);
  t.is((await d.request('DELETE', '/1.0/networks/ph3')).status, 400);

  await call('PUT', '/1.0/instances/phc/state', { action: 'stop', force: true });
  t.true(linkExists(parent), 'back on the host under its own name');
  t.is(readFileSync(`/sys/class/net/${parent}/address`, 'utf8').trim(), mac);
  t.is(mtuOf(parent), '1440');
  await call('DELETE', '/1.0/instances/phc');
  t.is((await d.request('DELETE', '/1.0/networks/ph3')).status, 200);
  t.is(mtuOf(parent), '1500');
});
