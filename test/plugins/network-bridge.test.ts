/**
 * The bridge network type against the real host: Linux bridges, dnsmasq and nftables. Every test
 * uses names unique to the run, keeps its traffic inside namespaces joined to its own bridge, and
 * deletes what it made.
 */
import test from 'ava';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { startTestKernel, type TestKernel } from '../../sdk/testing/index.js';
import { NetworksServiceRef, WarningsServiceRef, type EventEnvelope } from '../../sdk/index.js';
import { Kernel } from '../../kernel/kernel.js';
import { distRoot, projectRoot, waitFor } from '../helpers/daemon.js';
import { NFT, dnsmasqPids, joinBridge, linkExists, nftChains, nftRules, sh, uniqueName, type Namespace } from '../helpers/netns.js';

const PLUGINS = ['warnings', 'networks', 'network-bridge'];
const tableOf = (dataDir: string) => `corral_${createHash('sha256').update(path.resolve(dataDir)).digest('hex').slice(0, 8)}`;

let k: TestKernel;
let table: string;
const cleanups: (() => void | Promise<unknown>)[] = [];

test.before(async () => {
  k = await startTestKernel({ plugins: PLUGINS });
  table = tableOf(k.dataDir);
});

test.after.always(async () => {
  for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => undefined);
  const left = (await k.inject({ url: '/1.0/networks?recursion=1' })).json?.metadata ?? [];
  for (const n of left) if (n.managed) await k.inject({ method: 'DELETE', url: `/1.0/networks/${n.name}` });
  await k.stop();
  sh(NFT, ['delete', 'table', 'inet', table]);
});

/** A free /24 in 10.200-254.x.0 that neither the host nor other networks use (picked by the daemon itself). */
async function create(name: string, config: Record<string, string>) {
  const res = await k.inject({ method: 'POST', url: '/1.0/networks', payload: { name, config } });
  return res;
}

async function autoSubnet(): Promise<string> {
  const probe = uniqueName('p');
  const res = await create(probe, { 'ipv4.address': 'auto', 'ipv6.address': 'none' });
  if (res.statusCode !== 200) throw new Error(res.body);
  const address = (await k.inject({ url: `/1.0/networks/${probe}` })).json.metadata.config['ipv4.address'] as string;
  const del = await k.inject({ method: 'DELETE', url: `/1.0/networks/${probe}` });
  if (del.statusCode !== 200) throw new Error(del.body);
  return address;
}

const prefix24 = (cidr: string) => cidr.split('.').slice(0, 3).join('.');

function assertGone(t: any, name: string, dataDir: string) {
  t.false(linkExists(name), `bridge ${name} is gone`);
  t.deepEqual(dnsmasqPids(path.join(dataDir, 'networks', name)), [], 'no dnsmasq left');
  t.false(nftChains(table).some((c) => c.name.endsWith(`.${name}`)), 'no chain left');
  t.false(existsSync(path.join(dataDir, 'networks', name)), 'no files left');
}

test.serial('a bridge with DHCP, DNS and NAT: lease through udhcpc in a namespace, ping, leases with static reservations', async (t) => {
  const name = uniqueName();
  const net = prefix24(await autoSubnet());
  const res = await create(name, {
    'ipv4.address': `${net}.1/24`, 'ipv6.address': 'none', 'ipv4.nat': 'true',
    'ipv4.dhcp.expiry': '2h', 'ipv4.dhcp.gateway': `${net}.254`, 'ipv4.dhcp.ranges': `${net}.100-${net}.150`,
    'dns.search': 'example.internal,corp.internal',
  });
  t.is(res.statusCode, 200, res.body);
  const dir = path.join(k.dataDir, 'networks', name);
  t.is(dnsmasqPids(dir).length, 1);

  const ns = joinBridge(name);
  cleanups.push(() => ns.remove());
  const lease = ns.dhcp();
  // network_dhcp_expiry, network_dhcp_gateway, the range and network_dns_search reach the client.
  t.is(lease.lease, '7200');
  t.is(lease.router, `${net}.254`);
  const offered = Number(lease.ip!.split('.')[3]);
  t.true(lease.ip!.startsWith(`${net}.`) && offered >= 100 && offered <= 150, lease.ip);
  t.is(lease.search, 'example.internal corp.internal');
  t.is(lease.domain, 'lxd');
  const ping = ns.exec(['busybox', 'ping', '-c', '1', '-W', '2', `${net}.1`]);
  t.is(ping.status, 0, ping.stdout + ping.stderr);

  const leases = await k.inject({ url: `/1.0/networks/${name}/leases` });
  t.is(leases.statusCode, 200);
  const mine = leases.json.metadata.find((l: any) => l.hwaddr === ns.mac);
  t.deepEqual(mine, { hostname: '', hwaddr: ns.mac, address: lease.ip, type: 'dynamic', location: '' });
  t.deepEqual(leases.json.metadata.find((l: any) => l.type === 'gateway'), { hostname: `${name}.gw`, hwaddr: '', address: `${net}.1`, type: 'gateway', location: '' });

  // A NIC's static reservation (the hook NIC devices call): the MAC gets its own address and name.
  const service = k.kernel.services.get(NetworksServiceRef)!;
  const mac = '00:16:3e:aa:bb:01';
  await service.nicPlugged('default', name, { project: 'default', instance: 'c1', device: 'eth0', hwaddr: mac, ipv4: `${net}.42` });
  await t.throwsAsync(service.nicPlugged('default', name, { project: 'default', instance: 'c2', device: 'eth0', hwaddr: '00:16:3e:aa:bb:02', ipv4: `${net}.42` }), { message: /already reserved/ });
  await t.throwsAsync(service.nicPlugged('default', name, { project: 'default', instance: 'c2', device: 'eth0', hwaddr: '00:16:3e:aa:bb:02', ipv4: '10.254.254.7' }), { message: /outside/ });
  const reserved = joinBridge(name, mac);
  cleanups.push(() => reserved.remove());
  t.is(reserved.dhcp().ip, `${net}.42`);
  const withStatic = (await k.inject({ url: `/1.0/networks/${name}/leases` })).json.metadata;
  t.deepEqual(withStatic.filter((l: any) => l.hwaddr === mac), [{ hostname: 'c1', hwaddr: mac, address: `${net}.42`, type: 'static', location: '' }]);
  await service.nicUnplugged('default', name, { project: 'default', instance: 'c1', device: 'eth0', hwaddr: mac });
  t.is(service.parentInterface ? await service.parentInterface('default', name) : '', name);

  // /state reads the live interface: the ports, counters with errors and drops.
  const state = (await k.inject({ url: `/1.0/networks/${name}/state` })).json.metadata;
  t.deepEqual(state.bridge.upper_devices, [ns.hostEnd, reserved.hostEnd].sort());
  t.true(state.counters.packets_received > 0);
  for (const key of ['errors_received', 'errors_sent', 'packets_dropped_inbound', 'packets_dropped_outbound']) t.is(typeof state.counters[key], 'number');

  ns.remove();
  reserved.remove();
  t.is((await k.inject({ method: 'DELETE', url: `/1.0/networks/${name}` })).statusCode, 200);
  assertGone(t, name, k.dataDir);
});

test.serial('NAT, NAT order and address, firewall, routes, hwaddr and MTU become rules and link settings; updates apply live', async (t) => {
  const name = uniqueName();
  const net = prefix24(await autoSubnet());
  const routed = `10.${Number(net.split('.')[1]) ^ 1}.${net.split('.')[2]}.0/24`;
  const res = await create(name, {
    'ipv4.address': `${net}.1/24`, 'ipv6.address': 'none', 'ipv4.nat': 'true', 'ipv4.routes': routed,
    'bridge.hwaddr': '00:16:3e:12:34:56', 'bridge.mtu': '1400',
  });
  t.is(res.statusCode, 200, res.body);
  const rules = () => nftRules(table).filter((r) => r.includes(`.${name}:`));
  const chains = () => nftChains(table).filter((c) => c.name.endsWith(`.${name}`));
  t.true(rules().some((r) => r.startsWith(`pstrt.${name}:`) && r.includes('masquerade') && r.includes(`${net}.0`)));
  t.true(rules().some((r) => r.startsWith(`fwd.${name}:`)));
  t.true(rules().some((r) => r.startsWith(`in.${name}:`) && r.includes('"dport", "right": 67') || r.includes('67')));
  t.is(chains().find((c) => c.name === `pstrt.${name}`).prio, 99);
  const state = (await k.inject({ url: `/1.0/networks/${name}/state` })).json.metadata;
  t.is(state.hwaddr, '00:16:3e:12:34:56');
  t.is(state.mtu, 1400);
  const route = JSON.parse(sh('ip', ['-j', 'route', 'show', routed]).stdout);
  t.is(route[0]?.dev, name);

  // network_nat_address and network_nat_order; network_firewall_filtering off drops the forward chain.
  const get = await k.inject({ url: `/1.0/networks/${name}` });
  const patch = await k.inject({
    method: 'PATCH', url: `/1.0/networks/${name}`, headers: { 'if-match': String(get.headers.etag) },
    payload: { config: { 'ipv4.nat.address': '192.0.2.2', 'ipv4.nat.order': 'after', 'ipv4.firewall': 'false', 'ipv4.routes': '', 'bridge.mtu': '1300' } },
  });
  t.is(patch.statusCode, 200, patch.body);
  t.true(rules().some((r) => r.startsWith(`pstrt.${name}:`) && r.includes('snat') && r.includes('192.0.2.2')));
  t.false(rules().some((r) => r.includes('masquerade')));
  t.is(chains().find((c) => c.name === `pstrt.${name}`).prio, 101);
  t.false(chains().some((c) => c.name === `fwd.${name}`));
  t.deepEqual(JSON.parse(sh('ip', ['-j', 'route', 'show', routed]).stdout), []);
  t.is((await k.inject({ url: `/1.0/networks/${name}/state` })).json.metadata.mtu, 1300);
  const stale = await k.inject({ method: 'PUT', url: `/1.0/networks/${name}`, headers: { 'if-match': String(get.headers.etag) }, payload: { config: {} } });
  t.is(stale.statusCode, 412);

  // Reapplying the same config (what a restart does) never duplicates a rule.
  const before = rules().length;
  const current = (await k.inject({ url: `/1.0/networks/${name}` })).json.metadata;
  t.is((await k.inject({ method: 'PUT', url: `/1.0/networks/${name}`, payload: { config: current.config } })).statusCode, 200);
  t.is(rules().length, before);
  t.is(dnsmasqPids(path.join(k.dataDir, 'networks', name)).length, 1);

  t.is((await k.inject({ method: 'DELETE', url: `/1.0/networks/${name}` })).statusCode, 200);
  assertGone(t, name, k.dataDir);
});

test.serial('vxlan tunnels: id, ttl and the interface they use (network_vxlan_interface, network_vxlan_ttl)', async (t) => {
  const name = uniqueName();
  const uplink = uniqueName('u');
  t.is(sh('ip', ['link', 'add', uplink, 'type', 'veth', 'peer', 'name', `${uplink}p`]).status, 0);
  cleanups.push(() => void sh('ip', ['link', 'del', uplink]));
  const res = await create(name, {
    'ipv4.address': 'none', 'ipv6.address': 'none',
    'tunnel.t1.protocol': 'vxlan', 'tunnel.t1.id': '77', 'tunnel.t1.interface': uplink, 'tunnel.t1.ttl': '5', 'tunnel.t1.group': '239.0.0.9',
  });
  t.is(res.statusCode, 200, res.body);
  const link = JSON.parse(sh('ip', ['-j', '-d', 'link', 'show', `${name}-t1`]).stdout)[0];
  t.is(link.linkinfo.info_kind, 'vxlan');
  t.is(link.linkinfo.info_data.id, 77);
  t.is(link.linkinfo.info_data.ttl, 5);
  t.is(link.linkinfo.info_data.link, uplink);
  t.is(link.master, name);
  t.is((await k.inject({ method: 'PATCH', url: `/1.0/networks/${name}`, payload: { config: { 'tunnel.t1.ttl': '9' } } })).statusCode, 200);
  t.is(JSON.parse(sh('ip', ['-j', '-d', 'link', 'show', `${name}-t1`]).stdout)[0].linkinfo.info_data.ttl, 9);
  const bad = await k.inject({ method: 'PATCH', url: `/1.0/networks/${name}`, payload: { config: { 'tunnel.t1.interface': 'crtnosuch0' } } });
  t.is(bad.statusCode, 400);
  t.regex(bad.json.error, /does not exist/);
  t.is((await k.inject({ method: 'DELETE', url: `/1.0/networks/${name}` })).statusCode, 200);
  t.false(linkExists(`${name}-t1`));
  assertGone(t, name, k.dataDir);
});

test.serial('bad input: clear 400s and nothing half-created', async (t) => {
  const first = uniqueName();
  const net = prefix24(await autoSubnet());
  t.is((await create(first, { 'ipv4.address': `${net}.1/24`, 'ipv6.address': 'none' })).statusCode, 200);
  cleanups.push(() => k.inject({ method: 'DELETE', url: `/1.0/networks/${first}` }));
  const name = uniqueName();
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ name: first, config: { 'ipv4.address': 'none', 'ipv6.address': 'none' } }, /already exists/],
    [{ name: 'lo', config: {} }, /host network interface/],
    [{ name: 'crtabcdefghijklm', config: {} }, /too long/],
    [{ name: 'crt/x', config: {} }, /slashes/],
    [{ name: 'crt:x', config: {} }, /colons/],
    [{ name: 'crt x', config: {} }, /white space/],
    [{ name: '', config: {} }, /No name/],
    [{ name, config: { 'ipv4.address': `${net}.9/25`, 'ipv6.address': 'none' } }, /overlaps with network/],
    [{ name, config: { 'ipv4.address': '192.0.2.77/24', 'ipv6.address': 'none' } }, /already in use on this host/],
    [{ name, config: { 'ipv4.address': '10.254.77.1/24', 'ipv6.address': 'none', 'ipv4.dhcp.ranges': '10.9.9.2-10.9.9.20' } }, /outside the network's subnet/],
    [{ name, config: { 'ipv4.address': '10.254.77.1/24', 'ipv6.address': 'none', 'ipv4.dhcp.gateway': '10.9.9.2' } }, /outside the network's subnet/],
    [{ name, config: { 'ipv4.address': '10.254.77.0/24', 'ipv6.address': 'none' } }, /usable host address/],
    [{ name, config: { 'ipv4.address': 'banana' } }, /ipv4.address/],
    [{ name, config: { 'bridge.mtu': 'abc', 'ipv4.address': 'none', 'ipv6.address': 'none' } }, /bridge.mtu/],
    [{ name, config: { 'bridge.external_interfaces': 'crtnosuch0', 'ipv4.address': 'none', 'ipv6.address': 'none' } }, /does not exist/],
    [{ name, config: { 'ipv4.address': 'none', 'ipv6.address': 'none', 'tunnel.averylongname.protocol': 'vxlan' } }, /longer than 15/],
    [{ name, config: { 'bogus.key': '1' } }, /bogus.key/],
    [{ name, type: 'macvlan', config: {} }, /not enabled/],
    [{ name, type: 'bogus', config: {} }, /Unknown network type/],
  ];
  for (const [body, message] of cases) {
    const res = await k.inject({ method: 'POST', url: '/1.0/networks', payload: body });
    t.is(res.statusCode, 400, `${JSON.stringify(body)}: ${res.body}`);
    t.regex(res.json.error, message, JSON.stringify(body));
  }
  assertGone(t, name, k.dataDir);
  t.is((await k.inject({ url: `/1.0/networks/${name}` })).statusCode, 404);
  // A failure in the middle of a start (the bridge is up, then the tunnel cannot be made: its
  // addresses mix families) takes the bridge, dnsmasq and the rules down again.
  const third = uniqueName();
  const bad = await create(third, { 'ipv4.address': '10.254.78.1/24', 'ipv6.address': 'none', 'tunnel.t1.protocol': 'vxlan', 'tunnel.t1.local': '::1', 'tunnel.t1.remote': '127.0.0.2' });
  t.is(bad.statusCode, 400, bad.body);
  t.regex(bad.json.error, /Setting up the bridge failed/);
  assertGone(t, third, k.dataDir);
});

test.serial('a crashed dnsmasq is restarted with a warning', async (t) => {
  const name = uniqueName();
  t.is((await create(name, { 'ipv4.address': `${prefix24(await autoSubnet())}.1/24`, 'ipv6.address': 'none' })).statusCode, 200);
  cleanups.push(() => k.inject({ method: 'DELETE', url: `/1.0/networks/${name}` }));
  const dir = path.join(k.dataDir, 'networks', name);
  const [pid] = dnsmasqPids(dir);
  process.kill(pid!, 'SIGKILL');
  // While dnsmasq daemonizes, its parent and children show for a moment: wait for the one process
  // that wrote the pid file to be the only one left.
  const daemonized = () => {
    const now = dnsmasqPids(dir);
    const recorded = Number(readFileSync(path.join(dir, 'dnsmasq.pid'), 'utf8').trim() || 0);
    return now.length === 1 && now[0] !== pid && now[0] === recorded;
  };
  await waitFor(() => { try { return daemonized(); } catch { return false; } }, 8000, 'a new dnsmasq');
  t.is(dnsmasqPids(dir).length, 1);
  const warned = async () => ((await k.inject({ url: '/1.0/warnings?recursion=1' })).json.metadata as any[])
    .some((w) => w.type === 'Network DHCP/DNS server restarted' && w.entity_url === `/1.0/networks/${name}`);
  await waitFor(warned, 5000, 'the warning');
  t.true(await warned());
});

test.serial('a restart adopts running networks once and removes the leftovers of networks that are gone', async (t) => {
  const dataDir = k.dataDir.replace(/$/, '-restart');
  const start = (storeFile: string) => Kernel.start({
    dataDir, storeFile, registryFile: path.join(projectRoot, 'plugin-registry.json'), plugins: PLUGINS.join(','),
    compiledRoot: distRoot, logLevel: 'fatal', serverCertificate: false,
  });
  const { mkdirSync, rmSync } = await import('node:fs');
  mkdirSync(dataDir, { recursive: true });
  const store = path.join(dataDir, 'store.db');
  const t2 = tableOf(dataDir);
  cleanups.push(() => {
    sh(NFT, ['delete', 'table', 'inet', t2]);
    rmSync(dataDir, { recursive: true, force: true });
  });
  const kept = uniqueName();
  const gone = uniqueName();
  let kernel = await start(store);
  const inject = (kn: Kernel, method: string, url: string, payload?: unknown) => kn.inject({ method, url, payload: payload === undefined ? undefined : JSON.stringify(payload) });
  t.is((await inject(kernel, 'POST', '/1.0/networks', { name: kept, config: { 'ipv4.address': 'auto', 'ipv6.address': 'auto' } })).statusCode, 200);
  await kernel.stop();
  // The daemon exited (not the host): the network keeps running for its containers.
  t.true(linkExists(kept));
  t.is(dnsmasqPids(path.join(dataDir, 'networks', kept)).length, 1);
  const rulesBefore = nftRules(t2).length;
  kernel = await start(store);
  t.is(dnsmasqPids(path.join(dataDir, 'networks', kept)).length, 1);
  t.is(nftRules(t2).length, rulesBefore);
  t.true(linkExists(kept));
  await kernel.stop();

  // A network whose record is lost (a separate store stands in for the record of a deleted network) is cleaned up at boot.
  kernel = await start(path.join(dataDir, 'other.db'));
  t.is((await inject(kernel, 'POST', '/1.0/networks', { name: gone, config: { 'ipv4.address': 'auto', 'ipv6.address': 'none' } })).statusCode, 200);
  await kernel.stop();
  kernel = await start(store);
  t.false(linkExists(gone));
  t.deepEqual(dnsmasqPids(path.join(dataDir, 'networks', gone)), []);
  t.false(nftChains(t2).some((c) => c.name.endsWith(`.${gone}`)));
  t.false(readdirSync(path.join(dataDir, 'networks')).includes(gone));
  t.true(linkExists(kept));
  t.is((await inject(kernel, 'DELETE', `/1.0/networks/${kept}`)).statusCode, 200);
  await kernel.stop();
  t.false(linkExists(kept));
  t.deepEqual(dnsmasqPids(path.join(dataDir, 'networks', kept)), []);
  t.is(sh(NFT, ['list', 'table', 'inet', t2]).status, 1, 'the table goes with the last network');

  // A boot that knows no network at all removes what a lost one left, and its table with it.
  const lost = uniqueName();
  kernel = await start(path.join(dataDir, 'lost.db'));
  t.is((await inject(kernel, 'POST', '/1.0/networks', { name: lost, config: { 'ipv4.address': 'auto', 'ipv6.address': 'none' } })).statusCode, 200);
  await kernel.stop();
  t.true(nftChains(t2).some((c) => c.name.endsWith(`.${lost}`)));
  kernel = await start(path.join(dataDir, 'empty.db'));
  await kernel.stop();
  t.false(linkExists(lost));
  t.deepEqual(dnsmasqPids(path.join(dataDir, 'networks', lost)), []);
  t.is(sh(NFT, ['list', 'table', 'inet', t2]).status, 1, 'the table went at boot');
});

test.serial('a host shutdown (SIGPWR) takes the networks down', async (t) => {
  const dataDir = `${k.dataDir}-pwr`;
  const { mkdirSync, rmSync } = await import('node:fs');
  mkdirSync(dataDir, { recursive: true });
  cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
  const kernel = await Kernel.start({
    dataDir, storeFile: ':memory:', registryFile: path.join(projectRoot, 'plugin-registry.json'), plugins: PLUGINS.join(','),
    compiledRoot: distRoot, logLevel: 'fatal', serverCertificate: false,
  });
  const name = uniqueName();
  const res = await kernel.inject({ method: 'POST', url: '/1.0/networks', payload: JSON.stringify({ name, config: { 'ipv4.address': 'auto', 'ipv6.address': 'none' } }) });
  t.is(res.statusCode, 200, res.payload);
  await kernel.stop({ hostShutdown: true });
  t.false(linkExists(name));
  t.deepEqual(dnsmasqPids(path.join(dataDir, 'networks', name)), []);
  t.is(sh(NFT, ['list', 'table', 'inet', tableOf(dataDir)]).status, 1);
});

test.serial('lifecycle events for create, update, rename and delete', async (t) => {
  const events: EventEnvelope[] = [];
  const off = k.kernel.events.subscribe((e) => events.push(e), ['lifecycle']);
  const name = uniqueName();
  const renamed = uniqueName();
  t.is((await create(name, { 'ipv4.address': 'none', 'ipv6.address': 'none' })).statusCode, 200);
  t.is((await k.inject({ method: 'PATCH', url: `/1.0/networks/${name}`, payload: { description: 'd' } })).statusCode, 200);
  const ren = await k.inject({ method: 'POST', url: `/1.0/networks/${name}`, payload: { name: renamed } });
  t.is(ren.statusCode, 200, ren.body);
  t.false(linkExists(name));
  t.true(linkExists(renamed));
  t.is((await k.inject({ url: `/1.0/networks/${renamed}` })).json.metadata.description, 'd');
  t.is((await k.inject({ method: 'DELETE', url: `/1.0/networks/${renamed}` })).statusCode, 200);
  off();
  const seen = events.map((e) => [(e.metadata as any).action, (e.metadata as any).source]);
  t.deepEqual(seen, [
    ['network-created', `/1.0/networks/${name}`],
    ['network-updated', `/1.0/networks/${name}`],
    ['network-renamed', `/1.0/networks/${renamed}`],
    ['network-deleted', `/1.0/networks/${renamed}`],
  ]);
  t.deepEqual((events[2]!.metadata as any).context, { old_name: name });
  void WarningsServiceRef;
});
