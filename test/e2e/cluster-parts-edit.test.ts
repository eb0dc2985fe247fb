/**
 * Editing a cluster's networks and storage pools through the real `lxc`, on 3 members in network
 * namespaces: shared keys change on every member's host (bridge address, dnsmasq; a btrfs pool's mount
 * options), member-specific keys only with `--target` and only on that member (a bridge's external
 * interface; a loop pool's size), a change one member's host refuses is reported and undone everywhere,
 * and a network rename is refused as the reference refuses it. The bridges live in the members'
 * namespaces, without NAT.
 */
import test from 'ava';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { clusterNetUnavailable, makeClusterNet, type ClusterNet, type NetDaemon } from '../helpers/cluster-net.js';
import { waitFor } from '../helpers/daemon.js';
import { lxcOk, lxcRefused } from '../helpers/clients.js';

const skip = clusterNetUnavailable();
const serial = skip ? test.serial.skip : test.serial;
if (skip) console.warn(`cluster-parts-edit skipped: ${skip}`);

let net: ClusterNet;
let members: NetDaemon[] = [];
const address = (d: NetDaemon) => `${d.member.address}:8443`;

/** The bridge's global IPv4 addresses in the member's namespace. */
function bridgeAddresses(d: NetDaemon, name: string): string[] {
  const out = d.member.exec(['ip', '-j', '-4', 'addr', 'show', 'dev', name]);
  if (out.status !== 0) return [];
  return (JSON.parse(out.stdout) as { addr_info: { local: string; prefixlen: number }[] }[])
    .flatMap((l) => l.addr_info.map((a) => `${a.local}/${a.prefixlen}`));
}

const dnsmasqConf = (d: NetDaemon, name: string) => {
  const file = `${d.dir}/networks/${name}/dnsmasq.conf`;
  return existsSync(file) ? readFileSync(file, 'utf8') : '';
};

/** The bridge a host interface is a port of, in the member's namespace. */
function masterOf(d: NetDaemon, ifname: string): string | undefined {
  const out = d.member.exec(['ip', '-j', 'link', 'show', 'dev', ifname]);
  return out.status === 0 ? (JSON.parse(out.stdout) as { master?: string }[])[0]?.master : undefined;
}

/** The mount options of a pool's mount point, as the daemon sees it (`ip netns exec` gave it its own mount namespace). */
function mountOptions(d: NetDaemon, pool: string): string[] {
  const target = `${d.dir}/storage-pools/${pool}`;
  const line = readFileSync(`/proc/${d.child.pid}/mountinfo`, 'utf8').split('\n').find((l) => l.split(' ')[4] === target);
  return line ? line.split(' ')[5]!.split(',') : [];
}

test.before(async () => {
  if (skip) return;
  net = makeClusterNet({ subnet: '10.19.14', block: 1, members: 3 });
  const [d1, d2, d3] = [
    await net.startDaemon(net.members[0]!, { args: ['--init', 'auto'] }),
    await net.startDaemon(net.members[1]!),
    await net.startDaemon(net.members[2]!),
  ];
  members = [d1!, d2!, d3!];
  const ok = { is: (a: unknown, b: unknown, m?: string) => { if (a !== b) throw new Error(m); } };
  await lxcOk(ok, d1!.socket, 'network', 'create', 'ebr0', 'ipv4.address=10.214.1.1/24', 'ipv4.nat=false', 'ipv6.address=none');
  await lxcOk(ok, d1!.socket, 'config', 'set', 'core.https_address', address(d1!));
  await lxcOk(ok, d1!.socket, 'cluster', 'enable', 'm1');
  const required = JSON.parse(await lxcOk(ok, d1!.socket, 'query', '/1.0/cluster')).member_config;
  for (const [i, d] of [[2, d2!], [3, d3!]] as const) {
    const token = (await lxcOk(ok, d1!.socket, 'cluster', 'add', `m${i}`)).trim().split('\n').pop()!.trim();
    await lxcOk(ok, d.socket, 'config', 'set', 'core.https_address', address(d));
    const body = { server_name: `m${i}`, enabled: true, server_address: address(d), cluster_address: address(d1!), cluster_token: token, member_config: required };
    await lxcOk(ok, d.socket, 'query', '--wait', '-X', 'PUT', '-d', JSON.stringify(body), '/1.0/cluster');
  }
});

test.afterEach.always((t) => {
  if (!t.passed) for (const d of members) t.log(`${d.member.ns}: ${d.output().slice(-3000)}`);
});

test.after.always(async () => {
  if (net) await net.teardown();
});

serial('a shared key set or unset through any member changes every member\'s bridge and dnsmasq', async (t) => {
  const [d1, d2, d3] = members as [NetDaemon, NetDaemon, NetDaemon];
  for (const d of members) t.deepEqual(bridgeAddresses(d, 'ebr0'), ['10.214.1.1/24'], d.member.ns);

  await lxcOk(t, d2.socket, 'network', 'set', 'ebr0', 'ipv4.address=10.214.2.1/24', 'ipv4.dhcp.ranges=10.214.2.50-10.214.2.60');
  for (const d of members) {
    t.deepEqual(bridgeAddresses(d, 'ebr0'), ['10.214.2.1/24'], `${d.member.ns} has the new address`);
    t.regex(dnsmasqConf(d, 'ebr0'), /10\.214\.2\.50,10\.214\.2\.60/, `${d.member.ns}'s dnsmasq serves the new range`);
  }
  t.is((await lxcOk(t, d3.socket, 'network', 'get', 'ebr0', 'ipv4.dhcp.ranges')).trim(), '10.214.2.50-10.214.2.60');
  const shown = JSON.parse(await lxcOk(t, d1.socket, 'query', '/1.0/networks/ebr0'));
  t.is(shown.status, 'Created');
  t.deepEqual(shown.locations, ['m1', 'm2', 'm3']);

  await lxcOk(t, d3.socket, 'network', 'unset', 'ebr0', 'ipv4.dhcp.ranges');
  for (const d of members) t.notRegex(dnsmasqConf(d, 'ebr0'), /10\.214\.2\.50,10\.214\.2\.60/, `${d.member.ns}'s dnsmasq dropped the range`);

  // PATCH merges into the shared keys, as `lxc network edit` and other clients may send.
  await lxcOk(t, d1.socket, 'query', '-X', 'PATCH', '-d', JSON.stringify({ config: { 'ipv4.dhcp.expiry': '2h' } }), '/1.0/networks/ebr0');
  for (const d of members) t.regex(dnsmasqConf(d, 'ebr0'), /,2h\b/, `${d.member.ns}'s dnsmasq has the new lease time`);
  t.is((await lxcOk(t, d2.socket, 'network', 'get', 'ebr0', 'ipv4.address')).trim(), '10.214.2.1/24', 'PATCH kept the other keys');
});

serial('a member-specific key changes only with --target, on that member alone; a shared key is refused with --target', async (t) => {
  const [d1, d2] = members as [NetDaemon, NetDaemon, NetDaemon];
  const without = await lxcRefused(t, d1.socket, 'network', 'set', 'ebr0', 'bridge.external_interfaces=ex0');
  t.regex(without, /member-specific/);

  t.is(d2.member.exec(['ip', 'link', 'add', 'ex0', 'type', 'veth', 'peer', 'name', 'ex1']).status, 0);
  await lxcOk(t, d1.socket, 'network', 'set', 'ebr0', 'bridge.external_interfaces=ex0', '--target', 'm2');
  t.is(masterOf(d2, 'ex0'), 'ebr0', 'm2\'s interface is a port of its bridge');
  const onM2 = JSON.parse(await lxcOk(t, d1.socket, 'query', '/1.0/networks/ebr0?target=m2'));
  t.is(onM2.config['bridge.external_interfaces'], 'ex0');
  const onM1 = JSON.parse(await lxcOk(t, d1.socket, 'query', '/1.0/networks/ebr0?target=m1'));
  t.is(onM1.config['bridge.external_interfaces'], undefined, 'm1 keeps its own keys');
  const shared = JSON.parse(await lxcOk(t, d1.socket, 'query', '/1.0/networks/ebr0'));
  t.is(shared.config['bridge.external_interfaces'], undefined, 'the cluster-wide view has no member-specific keys');

  const sharedWithTarget = await lxcRefused(t, d1.socket, 'network', 'set', 'ebr0', 'ipv4.dhcp.expiry=3h', '--target', 'm2');
  t.regex(sharedWithTarget, /Config key "ipv4\.dhcp\.expiry" may not be used as member-specific key/);

  // A shared edit afterwards keeps m2's own keys.
  await lxcOk(t, d1.socket, 'network', 'set', 'ebr0', 'ipv4.dhcp.expiry=4h');
  t.is(masterOf(d2, 'ex0'), 'ebr0', 'a shared edit left m2\'s port alone');
  t.is(JSON.parse(await lxcOk(t, d1.socket, 'query', '/1.0/networks/ebr0?target=m2')).config['bridge.external_interfaces'], 'ex0');

  await lxcOk(t, d1.socket, 'network', 'unset', 'ebr0', 'bridge.external_interfaces', '--target', 'm2');
  t.is(masterOf(d2, 'ex0'), undefined, 'the port left m2\'s bridge');
  d2.member.exec(['ip', 'link', 'del', 'ex0']);
});

serial('a change one member\'s host cannot take is reported with that member and undone on every member', async (t) => {
  const [d1, , d3] = members as [NetDaemon, NetDaemon, NetDaemon];
  // Only m3's host already uses this subnet.
  t.is(d3.member.exec(['ip', 'addr', 'add', '10.214.3.5/24', 'dev', 'lo']).status, 0);
  try {
    const refused = await lxcRefused(t, d1.socket, 'network', 'set', 'ebr0', 'ipv4.address=10.214.3.1/24');
    t.regex(refused, /member "m3"/);
    t.regex(refused, /overlaps/);
    for (const d of members) t.deepEqual(bridgeAddresses(d, 'ebr0'), ['10.214.2.1/24'], `${d.member.ns} is back on the address before`);
    t.is((await lxcOk(t, d1.socket, 'network', 'get', 'ebr0', 'ipv4.address')).trim(), '10.214.2.1/24');
    t.is(JSON.parse(await lxcOk(t, d1.socket, 'query', '/1.0/networks/ebr0')).status, 'Created');
  } finally {
    d3.member.exec(['ip', 'addr', 'del', '10.214.3.5/24', 'dev', 'lo']);
  }
  // The same change goes through once the host allows it.
  await lxcOk(t, d1.socket, 'network', 'set', 'ebr0', 'ipv4.address=10.214.3.1/24');
  for (const d of members) t.deepEqual(bridgeAddresses(d, 'ebr0'), ['10.214.3.1/24'], d.member.ns);
});

serial('renaming a cluster\'s network is refused, as the reference refuses it', async (t) => {
  const [d1, d2] = members as [NetDaemon, NetDaemon, NetDaemon];
  const refused = await lxcRefused(t, d1.socket, 'network', 'rename', 'ebr0', 'ebr9');
  t.regex(refused, /Renaming a cluster's network is not supported/);
  t.deepEqual(bridgeAddresses(d2, 'ebr0'), ['10.214.3.1/24'], 'the bridge is still there under its name');
  await lxcOk(t, d1.socket, 'network', 'delete', 'ebr0');
  for (const d of members) t.deepEqual(bridgeAddresses(d, 'ebr0'), [], `${d.member.ns} has no bridge left`);
});

serial('a pool\'s shared key is applied by every member\'s driver; its size changes only with --target, on that member', async (t) => {
  const [d1, d2, d3] = members as [NetDaemon, NetDaemon, NetDaemon];
  for (const [d, m] of [[d1, 'm1'], [d2, 'm2']] as const) await lxcOk(t, d.socket, 'storage', 'create', 'bp', 'btrfs', 'size=1GiB', '--target', m);
  await lxcOk(t, d3.socket, 'storage', 'create', 'bp', 'btrfs', 'size=512MiB', '--target', 'm3');
  // A part not made yet takes a new member key with --target: its making uses it.
  await lxcOk(t, d1.socket, 'storage', 'set', 'bp', 'size=1GiB', '--target', 'm3');
  await lxcOk(t, d1.socket, 'storage', 'create', 'bp', 'btrfs');
  for (const d of members) t.false(mountOptions(d, 'bp').includes('noatime'), `${d.member.ns} mounted without noatime`);

  await lxcOk(t, d2.socket, 'storage', 'set', 'bp', 'btrfs.mount_options=user_subvol_rm_allowed,noatime');
  for (const d of members) t.true(mountOptions(d, 'bp').includes('noatime'), `${d.member.ns} remounted its part: ${mountOptions(d, 'bp')}`);
  t.is((await lxcOk(t, d3.socket, 'storage', 'get', 'bp', 'btrfs.mount_options')).trim(), 'user_subvol_rm_allowed,noatime');

  t.regex(await lxcRefused(t, d1.socket, 'storage', 'set', 'bp', 'size=2GiB'), /member-specific/);
  t.regex(await lxcRefused(t, d1.socket, 'storage', 'set', 'bp', 'rsync.bwlimit=1M', '--target', 'm2'), /Config key "rsync\.bwlimit" may not be used as member-specific key/);

  const sourceOf = async (m: string) => JSON.parse(await lxcOk(t, d1.socket, 'query', `/1.0/storage-pools/bp?target=${m}`)).config.source as string;
  await lxcOk(t, d1.socket, 'storage', 'set', 'bp', 'size=2GiB', '--target', 'm2');
  t.is(statSync(await sourceOf('m2')).size, 2 * 1024 ** 3, 'm2\'s loop file grew');
  t.is(statSync(await sourceOf('m1')).size, 1024 ** 3, 'm1\'s loop file did not');
  t.is(statSync(await sourceOf('m3')).size, 1024 ** 3, 'm3\'s loop file was made with the size set while pending');
  t.is(JSON.parse(await lxcOk(t, d1.socket, 'query', '/1.0/storage-pools/bp?target=m2')).config.size, '2GiB');
  t.is(JSON.parse(await lxcOk(t, d1.socket, 'query', '/1.0/storage-pools/bp?target=m1')).config.size, '1GiB');
  t.is(JSON.parse(await lxcOk(t, d1.socket, 'query', '/1.0/storage-pools/bp')).config.size, undefined, 'the cluster-wide view has no member-specific keys');
  t.regex(await lxcRefused(t, d1.socket, 'storage', 'set', 'bp', 'source=/tmp/elsewhere', '--target', 'm2'), /cannot be changed/);

  await lxcOk(t, d1.socket, 'storage', 'delete', 'bp');
  for (const d of members) t.deepEqual(mountOptions(d, 'bp'), [], `${d.member.ns} unmounted its part`);
});

serial('an edit while a member is offline is refused at once (503), and the keys stay as they were', async (t) => {
  const [d1, , d3] = members as [NetDaemon, NetDaemon, NetDaemon];
  for (const m of ['m1', 'm2', 'm3']) await lxcOk(t, d1.socket, 'network', 'create', 'obr0', '--target', m);
  await lxcOk(t, d1.socket, 'network', 'create', 'obr0', 'ipv4.address=10.214.4.1/24', 'ipv4.nat=false', 'ipv6.address=none');
  await d3.stop();
  await waitFor(async () => /^m3,.*OFFLINE/m.test(await lxcOk(t, d1.socket, 'cluster', 'list', '--format', 'csv')), 10_000, 'm3 shown OFFLINE');
  const asked = Date.now();
  const refused = await lxcRefused(t, d1.socket, 'network', 'set', 'obr0', 'ipv4.dhcp.expiry=2h');
  t.true(Date.now() - asked < 5_000, 'refused at once, not after the edit\'s bound');
  t.regex(refused, /Cluster member "m3" is offline/);
  const patched = await d1.request('PATCH', '/1.0/networks/obr0', { config: { 'ipv4.dhcp.expiry': '2h' } });
  t.is(patched.status, 503, patched.body);
  t.is((await lxcOk(t, d1.socket, 'network', 'get', 'obr0', 'ipv4.dhcp.expiry')).trim(), '');
});
