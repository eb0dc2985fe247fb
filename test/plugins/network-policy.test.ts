/**
 * Network ACLs and network forwards against the real host: a bridge network of the daemon, network
 * namespaces joined to it by veth pairs, real nftables. All traffic stays inside the namespaces and
 * the bridge the tests make (forward listen addresses are unassigned addresses of that bridge's own
 * subnet, so nothing could leave the machine even without the rules).
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { startTestKernel, type TestKernel } from '../../sdk/testing/index.js';
import type { EventEnvelope } from '../../sdk/index.js';
import { NFT, joinBridge, sh, uniqueName, type Namespace } from '../helpers/netns.js';
import { aclTableName } from '../../plugins/network-acls/firewall.js';
import { forwardTableName } from '../../plugins/network-forwards/firewall.js';

const PLUGINS = ['warnings', 'networks', 'network-bridge', 'network-acls', 'network-forwards'];

let k: TestKernel;
const events: EventEnvelope[] = [];
const cleanups: (() => void)[] = [];
let bridge: string;
let net: string;
let a: Namespace;
let b: Namespace;

const brNetfilter = (() => {
  try {
    return readFileSync('/proc/sys/net/bridge/bridge-nf-call-iptables', 'utf8').trim() === '1';
  } catch {
    return false;
  }
})();

const inject = (method: string, url: string, payload?: unknown) => k.inject({ method: method as any, url, payload: payload as any });
const ping = (ns: Namespace, to: string) => ns.exec(['busybox', 'ping', '-c', '1', '-W', '1', to]).status === 0;
const tableRules = (family: string, table: string) => sh(NFT, ['list', 'table', family, table]).stdout;

test.before(async () => {
  k = await startTestKernel({ plugins: PLUGINS });
  k.kernel.events.subscribe((e) => events.push(e), ['lifecycle']);
  bridge = uniqueName();
  const res = await inject('POST', '/1.0/networks', { name: bridge, config: { 'ipv4.address': 'auto', 'ipv6.address': 'none', 'ipv4.nat': 'false' } });
  if (res.statusCode !== 200) throw new Error(res.body);
  const address = (await inject('GET', `/1.0/networks/${bridge}`)).json.metadata.config['ipv4.address'] as string;
  net = address.split('.').slice(0, 3).join('.');
  a = joinBridge(bridge);
  b = joinBridge(bridge);
  cleanups.push(() => a.remove(), () => b.remove());
  a.exec(['ip', 'addr', 'add', `${net}.10/24`, 'dev', 'eth0']);
  b.exec(['ip', 'addr', 'add', `${net}.20/24`, 'dev', 'eth0']);
  b.exec(['ip', 'route', 'add', 'default', 'via', `${net}.1`]);
});

test.after.always(async () => {
  for (const c of cleanups.reverse()) {
    try {
      c();
    } catch { /* already gone */ }
  }
  await inject('PUT', `/1.0/networks/${bridge}`, { config: { 'ipv4.address': `${net}.1/24`, 'ipv6.address': 'none' } });
  for (const acl of (await inject('GET', '/1.0/network-acls')).json?.metadata ?? []) await inject('DELETE', acl);
  await inject('DELETE', `/1.0/networks/${bridge}`);
  await k.stop();
  for (const t of [aclTableName(k.dataDir), forwardTableName(k.dataDir)]) sh(NFT, ['delete', 'table', 'inet', t]);
});

test.serial('network_acl, network_bridge_acl: an ACL dropping ICMP towards the instances takes effect on the bridge, updates apply live, removal restores', async (t) => {
  t.true(brNetfilter, 'this host hands bridged frames to the IP hooks (br_netfilter)');
  t.true(ping(a, `${net}.20`), 'the namespaces reach each other before any ACL');
  const acl = {
    name: 'no-ping', description: 'drop pings',
    ingress: [{ action: 'drop', protocol: 'icmp4', state: 'enabled' }, { action: 'allow', state: 'enabled' }],
    egress: [{ action: 'allow', state: 'enabled', description: 'anything out' }],
  };
  t.is((await inject('POST', '/1.0/network-acls', acl)).statusCode, 200);
  const shown = (await inject('GET', '/1.0/network-acls/no-ping')).json.metadata;
  t.deepEqual(shown, {
    name: 'no-ping', description: 'drop pings',
    egress: [{ action: 'allow', description: 'anything out', state: 'enabled' }],
    ingress: [{ action: 'drop', protocol: 'icmp4', state: 'enabled' }, { action: 'allow', state: 'enabled' }],
    config: {}, used_by: [],
  });

  const set = await inject('PATCH', `/1.0/networks/${bridge}`, { config: { 'security.acls': 'no-ping' } });
  t.is(set.statusCode, 200, set.body);
  t.deepEqual((await inject('GET', '/1.0/network-acls/no-ping')).json.metadata.used_by, [`/1.0/networks/${bridge}`]);
  t.false(ping(a, `${net}.20`), 'ICMP between two ports of the bridge is dropped');
  t.true(ping(a, `${net}.1`), 'egress to the host is allowed (the drop is an ingress rule)');
  t.regex(tableRules('inet', aclTableName(k.dataDir)), /oifname ".*" meta l4proto icmp drop/);

  // Deleting or renaming an ACL in use is refused and changes nothing.
  const del = await inject('DELETE', '/1.0/network-acls/no-ping');
  t.is(del.statusCode, 400);
  t.regex(del.json.error, /in use/);
  t.is((await inject('POST', '/1.0/network-acls/no-ping', { name: 'other' })).statusCode, 400);

  // A live update: the drop rule disabled, pings pass; enabled again, they stop.
  const etag = (await inject('GET', '/1.0/network-acls/no-ping')).headers.etag;
  const patched = await k.inject({ method: 'PATCH', url: '/1.0/network-acls/no-ping', headers: { 'if-match': String(etag) }, payload: { ingress: [{ action: 'drop', protocol: 'icmp4', state: 'disabled' }, { action: 'allow', state: 'enabled' }] } });
  t.is(patched.statusCode, 200, patched.body);
  t.true(ping(a, `${net}.20`), 'a disabled rule lets pings through');
  t.is((await k.inject({ method: 'PUT', url: '/1.0/network-acls/no-ping', headers: { 'if-match': String(etag) }, payload: acl })).statusCode, 412, 'a stale ETag is refused');
  t.is((await inject('PUT', '/1.0/network-acls/no-ping', acl)).statusCode, 200);
  t.false(ping(a, `${net}.20`));

  // The default action: with no allow rules, everything unmatched is rejected; `allow` opens it.
  t.is((await inject('PUT', '/1.0/network-acls/no-ping', { ...acl, ingress: [], egress: [] })).statusCode, 200);
  t.false(ping(a, `${net}.1`), 'the default egress action (reject) applies');
  t.is((await inject('PATCH', `/1.0/networks/${bridge}`, { config: { 'security.acls.default.egress.action': 'allow', 'security.acls.default.ingress.action': 'allow' } })).statusCode, 200);
  t.true(ping(a, `${net}.20`));

  // Removal restores traffic and empties the table.
  t.is((await inject('PUT', '/1.0/network-acls/no-ping', acl)).statusCode, 200);
  t.false(ping(a, `${net}.20`));
  t.is((await inject('PATCH', `/1.0/networks/${bridge}`, { config: { 'security.acls': '' } })).statusCode, 200);
  t.true(ping(a, `${net}.20`), 'pings pass again once the ACL is off the network');
  t.is(tableRules('inet', aclTableName(k.dataDir)), '');
  t.is((await inject('DELETE', '/1.0/network-acls/no-ping')).statusCode, 200);
  t.deepEqual(events.filter((e) => (e.metadata as any).source?.startsWith('/1.0/network-acls')).map((e) => (e.metadata as any).action),
    ['network-acl-created', 'network-acl-updated', 'network-acl-updated', 'network-acl-updated', 'network-acl-updated', 'network-acl-deleted']);
});

test.serial('network_acl: bad rules and names are clear 400s and store nothing; list, rename, ACL names as subjects', async (t) => {
  const bad: [unknown, RegExp][] = [
    [{ name: 'x1', ingress: [{ action: 'bogus', state: 'enabled' }] }, /ingress rule 0: action must be/],
    [{ name: 'x1', ingress: [{ action: 'allow' }] }, /state must be/],
    [{ name: 'x1', egress: [{ action: 'allow', state: 'enabled', source: '10.0.0.0/33' }] }, /egress rule 0: source: "10.0.0.0\/33"/],
    [{ name: 'x1', ingress: [{ action: 'allow', state: 'enabled', destination_port: '80' }] }, /needs protocol tcp or udp/],
    [{ name: 'x1', ingress: [{ action: 'allow', state: 'enabled', protocol: 'tcp', destination_port: '90-80' }] }, /first port must be lower/],
    [{ name: 'x1', ingress: [{ action: 'allow', state: 'enabled', protocol: 'tcp', icmp_type: '3' }] }, /icmp_type needs protocol icmp4/],
    [{ name: 'x1', ingress: [{ action: 'allow', state: 'enabled', protocol: 'icmp4', icmp_type: '300' }] }, /0 to 255/],
    [{ name: 'x1', ingress: [{ action: 'allow', state: 'enabled', protocol: 'icmp4', destination: 'fd00::1' }] }, /icmp4 cannot be used with IPv6/],
    [{ name: 'x1', ingress: [{ action: 'allow', state: 'enabled', source: '10.0.0.1', destination: 'fd00::2' }] }, /different IP families/],
    [{ name: 'x1', ingress: [{ action: 'allow', state: 'enabled', destination: '@internal' }] }, /only allowed in the source of ingress/],
    [{ name: 'x1', ingress: [{ action: 'allow', state: 'enabled', source: 'nonexistent' }] }, /not an address, subnet, range/],
    [{ name: 'x1', config: { foo: 'bar' } }, /Unknown network ACL option "foo"/],
    [{ name: '1abc' }, /may not start with a digit/],
    [{ name: 'a_b' }, /letters, digits and hyphens/],
    [{ name: '@x' }, /may not start with "@"/],
    [{ name: '' }, /No name/],
  ];
  for (const [body, message] of bad) {
    const res = await inject('POST', '/1.0/network-acls', body);
    t.is(res.statusCode, 400, JSON.stringify(body));
    t.regex(res.json.error, message);
  }
  t.deepEqual((await inject('GET', '/1.0/network-acls')).json.metadata, []);

  t.is((await inject('POST', '/1.0/network-acls', { name: 'web', egress: [{ action: 'allow', state: 'logged', protocol: 'tcp', destination: '10.0.0.0/8,192.168.1.1-192.168.1.9, fd00::/64', destination_port: '80,1000-2000' }] })).statusCode, 200);
  t.is((await inject('POST', '/1.0/network-acls', { name: 'web' })).statusCode, 400, 'a duplicate name');
  t.is((await inject('POST', '/1.0/network-acls', { name: 'from-web', ingress: [{ action: 'allow', state: 'enabled', source: 'web,@external' }] })).statusCode, 200);
  t.deepEqual((await inject('GET', '/1.0/network-acls/web')).json.metadata.used_by, ['/1.0/network-acls/from-web']);
  t.deepEqual((await inject('GET', '/1.0/network-acls')).json.metadata, ['/1.0/network-acls/from-web', '/1.0/network-acls/web']);
  t.is((await inject('GET', '/1.0/network-acls?recursion=1')).json.metadata.length, 2);
  t.is((await inject('GET', '/1.0/network-acls/nope')).statusCode, 404);

  // Names and selectors cannot be enforced on a bridge: refused when the ACL is put on the network.
  const refused = await inject('PATCH', `/1.0/networks/${bridge}`, { config: { 'security.acls': 'from-web' } });
  t.is(refused.statusCode, 400);
  t.regex(refused.json.error, /bridge networks can only enforce/);
  const missing = await inject('PATCH', `/1.0/networks/${bridge}`, { config: { 'security.acls': 'ghost' } });
  t.is(missing.statusCode, 400);
  t.regex(missing.json.error, /"ghost" does not exist/);
  t.is((await inject('PATCH', `/1.0/networks/${bridge}`, { config: { 'security.acls.default.ingress.action': 'bogus' } })).statusCode, 400);
  t.is((await inject('GET', `/1.0/networks/${bridge}`)).json.metadata.config['security.acls'], undefined);

  // A rule set using both families becomes one rule per family; an ACL in use that gains a name is refused.
  t.is((await inject('PATCH', `/1.0/networks/${bridge}`, { config: { 'security.acls': 'web', 'security.acls.default.ingress.action': 'allow', 'security.acls.default.egress.action': 'allow' } })).statusCode, 200);
  const rules = tableRules('inet', aclTableName(k.dataDir));
  t.regex(rules, /ip daddr \{ 10\.0\.0\.0\/8, 192\.168\.1\.1-192\.168\.1\.9 \} tcp dport \{ 80, 1000-2000 \} log prefix "web-egress-0 " accept/);
  t.regex(rules, /ip6 daddr fd00::\/64 tcp dport \{ 80, 1000-2000 \} log prefix "web-egress-0 " accept/);
  const gains = await inject('PUT', '/1.0/network-acls/web', { egress: [{ action: 'allow', state: 'enabled', destination: 'from-web' }] });
  t.is(gains.statusCode, 400);
  t.is((await inject('GET', '/1.0/network-acls/web')).json.metadata.egress[0].state, 'logged', 'the refused update changed nothing');
  t.is((await inject('PATCH', `/1.0/networks/${bridge}`, { config: { 'security.acls': '' } })).statusCode, 200);

  t.is((await inject('POST', '/1.0/network-acls/from-web', { name: 'from-web2' })).statusCode, 200);
  t.is((await inject('GET', '/1.0/network-acls/from-web2')).statusCode, 200);
  t.is((await inject('GET', '/1.0/network-acls/from-web')).statusCode, 404);
  for (const n of ['from-web2', 'web']) t.is((await inject('DELETE', `/1.0/network-acls/${n}`)).statusCode, 200);
});

test.serial('network_forward: a listen address and port reach a namespace host (busybox nc); bad input is refused; forwards follow their network', async (t) => {
  const listen = `${net}.200`;
  const server = spawn('ip', ['netns', 'exec', b.name, 'busybox', 'nc', '-l', '-p', '8080'], { stdio: ['pipe', 'pipe', 'pipe'] });
  cleanups.push(() => server.kill());
  server.stdin.end('through the forward\n');
  await new Promise((r) => setTimeout(r, 300));

  const res = await inject('POST', `/1.0/networks/${bridge}/forwards`, {
    listen_address: listen, description: 'web',
    ports: [{ protocol: 'tcp', listen_port: '80', target_port: '8080', target_address: `${net}.20`, description: 'to b' }],
  });
  t.is(res.statusCode, 200, res.body);
  t.is(res.headers.location, `/1.0/networks/${bridge}/forwards/${listen}`);
  const client = sh('busybox', ['nc', '-w', '3', listen, '80'], '');
  t.is(client.stdout, 'through the forward\n', client.stderr);

  t.deepEqual((await inject('GET', `/1.0/networks/${bridge}/forwards?recursion=1`)).json.metadata, [{
    description: 'web', config: {}, listen_address: listen, location: 'none',
    ports: [{ description: 'to b', protocol: 'tcp', listen_port: '80', target_port: '8080', target_address: `${net}.20` }],
  }]);
  const bad: [unknown, number, RegExp][] = [
    [{ listen_address: listen }, 409, /already exists/],
    [{ listen_address: 'banana' }, 400, /not an IP address/],
    [{ listen_address: '0.0.0.0' }, 400, /unspecified/],
    [{ listen_address: `${net}.201`, config: { target_address: '10.254.254.254' } }, 400, /not inside the subnet/],
    [{ listen_address: `${net}.201`, config: { foo: 'x' } }, 400, /Unknown network forward option/],
    [{ listen_address: `${net}.201`, ports: [{ protocol: 'tcp', listen_port: '80-82', target_port: '90-91', target_address: `${net}.20` }] }, 400, /do not pair up/],
    [{ listen_address: `${net}.201`, ports: [{ protocol: 'sctp', listen_port: '80', target_address: `${net}.20` }] }, 400, /tcp or udp/],
    [{ listen_address: `${net}.201`, ports: [{ protocol: 'tcp', listen_port: '80', target_address: `${net}.20` }, { protocol: 'tcp', listen_port: '79-81', target_address: `${net}.21` }] }, 400, /used twice/],
    [{ listen_address: `${net}.201`, ports: [{ protocol: 'tcp', listen_port: '80' }] }, 400, /No target address/],
  ];
  const before = tableRules('inet', forwardTableName(k.dataDir));
  for (const [body, status, message] of bad) {
    const r = await inject('POST', `/1.0/networks/${bridge}/forwards`, body);
    t.is(r.statusCode, status, JSON.stringify(body));
    t.regex(r.json.error, message);
  }
  t.is(tableRules('inet', forwardTableName(k.dataDir)), before, 'refused forwards left no rule');
  t.is((await inject('GET', `/1.0/networks/${bridge}/forwards`)).json.metadata.length, 1);
  t.is((await inject('GET', `/1.0/networks/nonet/forwards`)).statusCode, 404);

  // PATCH keeps what it does not name; a default target becomes a catch-all rule after the port rules.
  t.is((await inject('PATCH', `/1.0/networks/${bridge}/forwards/${listen}`, { config: { target_address: `${net}.10` } })).statusCode, 200);
  const shown = (await inject('GET', `/1.0/networks/${bridge}/forwards/${listen}`)).json.metadata;
  t.is(shown.description, 'web');
  t.is(shown.ports.length, 1);
  t.regex(tableRules('inet', forwardTableName(k.dataDir)), new RegExp(`ip daddr ${listen.replace(/\./g, '\\.')} dnat ip to ${net.replace(/\./g, '\\.')}\\.10`));

  // Paired ranges: each listen port reaches its own target port (one rule and a map, not a rule per port).
  const ranged = `${net}.202`;
  const rangeServer = spawn('ip', ['netns', 'exec', b.name, 'busybox', 'nc', '-l', '-p', '8082'], { stdio: ['pipe', 'pipe', 'pipe'] });
  cleanups.push(() => rangeServer.kill());
  rangeServer.stdin.end('through the second port of the range\n');
  await new Promise((r) => setTimeout(r, 300));
  t.is((await inject('POST', `/1.0/networks/${bridge}/forwards`, {
    listen_address: ranged, ports: [{ protocol: 'tcp', listen_port: '81-82', target_port: '8081-8082', target_address: `${net}.20` }],
  })).statusCode, 200);
  t.regex(tableRules('inet', forwardTableName(k.dataDir)), /tcp dport 81-82 dnat ip to tcp dport map \{ 81 : [\d.]+ \. 8081, 82 : [\d.]+ \. 8082 \}/);
  const rangeClient = sh('busybox', ['nc', '-w', '3', ranged, '82'], '');
  t.is(rangeClient.stdout, 'through the second port of the range\n', rangeClient.stderr);
  t.is((await inject('DELETE', `/1.0/networks/${bridge}/forwards/${ranged}`)).statusCode, 200);

  // Deleting the network takes its forwards (and their rules) with it: here the forward goes first.
  t.is((await inject('DELETE', `/1.0/networks/${bridge}/forwards/${listen}`)).statusCode, 200);
  t.is(tableRules('inet', forwardTableName(k.dataDir)), '');
  t.deepEqual(events.filter((e) => (e.metadata as any).action?.startsWith('network-forward')).map((e) => (e.metadata as any).action),
    ['network-forward-created', 'network-forward-updated', 'network-forward-created', 'network-forward-deleted', 'network-forward-deleted']);
});
