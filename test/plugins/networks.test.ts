/**
 * The networks family: managed networks beside the host's own interfaces, state read from the
 * live interface, used_by from profiles, and builds without the family.
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import { startTestKernel, type TestKernel } from '../../sdk/testing/index.js';
import { sh, uniqueName } from '../helpers/netns.js';

let k: TestKernel;

test.before(async () => {
  k = await startTestKernel({ plugins: ['warnings', 'profiles', 'networks', 'network-bridge'] });
});

test.after.always(async () => {
  const left = (await k.inject({ url: '/1.0/networks?recursion=1' })).json?.metadata ?? [];
  for (const n of left) if (n.managed) await k.inject({ method: 'DELETE', url: `/1.0/networks/${n.name}` });
  await k.stop();
});

test.serial('the list shows managed networks first, then the host interfaces as unmanaged, with their types', async (t) => {
  const name = uniqueName();
  t.is((await k.inject({ method: 'POST', url: '/1.0/networks', payload: { name, description: 'mine', config: { 'ipv4.address': 'none', 'ipv6.address': 'none' } } })).statusCode, 200);
  const urls = (await k.inject({ url: '/1.0/networks' })).json.metadata as string[];
  t.is(urls[0], `/1.0/networks/${name}`);
  t.true(urls.includes('/1.0/networks/lo'));
  const list = (await k.inject({ url: '/1.0/networks?recursion=1' })).json.metadata as any[];
  t.deepEqual(list[0], { config: { 'ipv4.address': 'none', 'ipv6.address': 'none' }, description: 'mine', name, type: 'bridge', used_by: [], managed: true, status: 'Created', locations: ['none'] });
  t.deepEqual(list.find((n) => n.name === 'lo'), { config: {}, description: '', name: 'lo', type: 'loopback', used_by: [], managed: false, status: '', locations: null });
  const eth0 = list.find((n) => n.name === 'eth0');
  if (eth0) t.is(eth0.type, 'physical');
  // Interfaces in the kernel's order (by index), as the reference lists them.
  const hostOrder = list.filter((n) => !n.managed).map((n) => Number(readFileSync(`/sys/class/net/${n.name}/ifindex`, 'utf8')));
  t.deepEqual(hostOrder, [...hostOrder].sort((a, b) => a - b));
  // The managed bridge is not listed twice.
  t.is(list.filter((n) => n.name === name).length, 1);

  const lo = await k.inject({ url: '/1.0/networks/lo' });
  t.is(lo.statusCode, 200);
  t.false(lo.json.metadata.managed);
  t.is((await k.inject({ method: 'PUT', url: '/1.0/networks/lo', payload: { config: {} } })).statusCode, 400);
  t.is((await k.inject({ method: 'DELETE', url: '/1.0/networks/lo' })).statusCode, 400);
  t.is((await k.inject({ url: '/1.0/networks/lo/leases' })).statusCode, 404);
  t.is((await k.inject({ url: '/1.0/networks/crtnosuch0' })).statusCode, 404);
  t.is((await k.inject({ url: '/1.0/networks/crtnosuch0/state' })).statusCode, 404);
  t.is((await k.inject({ method: 'DELETE', url: '/1.0/networks/crtnosuch0' })).statusCode, 404);
  t.is((await k.inject({ method: 'DELETE', url: `/1.0/networks/${name}` })).statusCode, 200);
});

test.serial('state: addresses, counters with errors and drops, and the bridge section (network_state, network_state_bond_bridge)', async (t) => {
  const lo = (await k.inject({ url: '/1.0/networks/lo/state' })).json.metadata;
  t.is(lo.type, 'loopback');
  t.is(lo.state, 'up');
  t.true(lo.addresses.some((a: any) => a.family === 'inet' && a.address === '127.0.0.1' && a.netmask === '8' && a.scope === 'host'));
  t.deepEqual(Object.keys(lo.counters).sort(), ['bytes_received', 'bytes_sent', 'errors_received', 'errors_sent', 'packets_dropped_inbound', 'packets_dropped_outbound', 'packets_received', 'packets_sent']);
  t.is(lo.bridge, null);
  t.is(lo.bond, null);
  t.is(lo.vlan, null);
  const stats = JSON.parse(sh('ip', ['-j', '-s', 'link', 'show', 'lo']).stdout)[0].stats64;
  t.true(lo.counters.bytes_received <= stats.rx.bytes);

  const name = uniqueName();
  t.is((await k.inject({ method: 'POST', url: '/1.0/networks', payload: { name, config: { 'ipv4.address': 'none', 'ipv6.address': 'none', 'bridge.hwaddr': '00:16:3e:01:02:03' } } })).statusCode, 200);
  const state = (await k.inject({ url: `/1.0/networks/${name}/state` })).json.metadata;
  t.deepEqual(state.bridge, { id: '8000.00163e010203', stp: false, forward_delay: 1500, vlan_default: 0, vlan_filtering: false, upper_devices: [] });
  t.is(state.hwaddr, '00:16:3e:01:02:03');
  t.is(state.mtu, 1500);
  t.is((await k.inject({ method: 'DELETE', url: `/1.0/networks/${name}` })).statusCode, 200);
});

test.serial('used_by lists profiles whose NICs name the network; a network in use is not deleted or renamed', async (t) => {
  const name = uniqueName();
  const profile = uniqueName();
  t.is((await k.inject({ method: 'POST', url: '/1.0/networks', payload: { name, config: { 'ipv4.address': 'none', 'ipv6.address': 'none' } } })).statusCode, 200);
  const made = await k.inject({ method: 'POST', url: '/1.0/profiles', payload: { name: profile, devices: { eth0: { type: 'nic', network: name, name: 'eth0' } } } });
  t.is(made.statusCode, 200, made.body);
  t.deepEqual((await k.inject({ url: `/1.0/networks/${name}` })).json.metadata.used_by, [`/1.0/profiles/${profile}`]);
  const del = await k.inject({ method: 'DELETE', url: `/1.0/networks/${name}` });
  t.is(del.statusCode, 400);
  t.regex(del.json.error, /in use/);
  t.is((await k.inject({ method: 'POST', url: `/1.0/networks/${name}`, payload: { name: uniqueName() } })).statusCode, 400);
  t.is((await k.inject({ method: 'DELETE', url: `/1.0/profiles/${profile}` })).statusCode, 200);
  t.is((await k.inject({ method: 'DELETE', url: `/1.0/networks/${name}` })).statusCode, 200);
});

test.serial('the claimed extension names are advertised; a build without the family has no network routes', async (t) => {
  const exts = (await k.inject({ url: '/1.0' })).json.metadata.api_extensions as string[];
  for (const name of ['network', 'network_leases', 'network_state', 'network_firewall_filtering', 'network_dhcp_expiry', 'network_nat_address']) t.true(exts.includes(name), name);
  const bare = await startTestKernel({ plugins: ['warnings'] });
  t.is((await bare.inject({ url: '/1.0/networks' })).statusCode, 404);
  t.false(((await bare.inject({ url: '/1.0' })).json.metadata.api_extensions as string[]).includes('network'));
  await bare.stop();
});
