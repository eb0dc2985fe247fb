/**
 * Network ACLs and forwards through the real client: lxc network acl create/list/show/edit/rename/
 * delete, rule add/remove, lxc network set security.acls with real traffic between two namespaces
 * on the bridge, and lxc network forward create/list/show/port add/port remove/delete.
 */
import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { startDaemon, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { lxc, lxcOk, lxcWithInput } from '../helpers/clients.js';
import { NFT, joinBridge, sh, uniqueName, type Namespace } from '../helpers/netns.js';
import { aclTableName } from '../../plugins/network-acls/firewall.js';
import { forwardTableName } from '../../plugins/network-forwards/firewall.js';

let d: Daemon;
const dir = mkdtempSync(path.join(tmpdir(), 'corral-acls-e2e-'));
const spaces: Namespace[] = [];

test.before(async () => {
  d = await startDaemon({ plugins: 'full', dir });
});

test.after.always(async () => {
  for (const ns of spaces) ns.remove();
  const left = (await d.request('GET', '/1.0/networks?recursion=1').catch(() => undefined))?.json?.metadata ?? [];
  for (const n of left) if (n.managed) await d.request('DELETE', `/1.0/networks/${n.name}`);
  await stopDaemons();
  for (const t of [aclTableName(dir), forwardTableName(dir)]) sh(NFT, ['delete', 'table', 'inet', t]);
  rmSync(dir, { recursive: true, force: true });
});

const ping = (ns: Namespace, to: string) => ns.exec(['busybox', 'ping', '-c', '1', '-W', '1', to]).status === 0;

test.serial('lxc network acl create/rule add/list/show/edit/rename/delete and security.acls on a bridge with real traffic', async (t) => {
  const br = uniqueName();
  await lxcOk(t, d.socket, 'network', 'create', br, 'ipv4.address=auto', 'ipv6.address=none');
  const subnet = (YAML.parse(await lxcOk(t, d.socket, 'network', 'show', br)).config['ipv4.address'] as string).replace(/\.1\/24$/, '');
  const a = joinBridge(br);
  const b = joinBridge(br);
  spaces.push(a, b);
  a.exec(['ip', 'addr', 'add', `${subnet}.10/24`, 'dev', 'eth0']);
  b.exec(['ip', 'addr', 'add', `${subnet}.20/24`, 'dev', 'eth0']);
  t.true(ping(a, `${subnet}.20`));

  t.regex(await lxcOk(t, d.socket, 'network', 'acl', 'create', 'web', 'user.team=blue'), /Network ACL web created/);
  await lxcOk(t, d.socket, 'network', 'acl', 'rule', 'add', 'web', 'ingress', 'action=drop', 'protocol=icmp4');
  await lxcOk(t, d.socket, 'network', 'acl', 'rule', 'add', 'web', 'egress', 'action=allow', 'protocol=tcp', 'destination_port=80,1000-2000', 'state=logged');
  const bad = await lxc(d.socket, 'network', 'acl', 'rule', 'add', 'web', 'ingress', 'action=bogus');
  t.not(bad.status, 0);
  t.regex(bad.stderr, /action must be one of/);
  const shown = YAML.parse(await lxcOk(t, d.socket, 'network', 'acl', 'show', 'web'));
  t.deepEqual(shown.ingress, [{ action: 'drop', protocol: 'icmp4', state: 'enabled' }]);
  t.deepEqual(shown.egress, [{ action: 'allow', protocol: 'tcp', destination_port: '80,1000-2000', state: 'logged' }]);
  t.deepEqual(shown.config, { 'user.team': 'blue' });
  t.regex(await lxcOk(t, d.socket, 'network', 'acl', 'list', '--format', 'csv'), /^web,,0$/m);

  const edited = await lxcWithInput(d.socket, YAML.stringify({ ...shown, description: 'edited', used_by: undefined }), 'network', 'acl', 'edit', 'web');
  t.is(edited.status, 0, edited.stderr);
  t.is(YAML.parse(await lxcOk(t, d.socket, 'network', 'acl', 'show', 'web')).description, 'edited');
  await lxcOk(t, d.socket, 'network', 'acl', 'rename', 'web', 'web2');

  // On the bridge (other traffic allowed by default): pings between the namespaces stop, and come back.
  await lxcOk(t, d.socket, 'network', 'set', br, 'security.acls=web2', 'security.acls.default.ingress.action=allow', 'security.acls.default.egress.action=allow');
  t.false(ping(a, `${subnet}.20`), 'the ACL drops ICMP between the two ports');
  t.regex(await lxcOk(t, d.socket, 'network', 'acl', 'list', '--format', 'csv'), /^web2,edited,1$/m);
  const inUse = await lxc(d.socket, 'network', 'acl', 'delete', 'web2');
  t.not(inUse.status, 0);
  t.regex(inUse.stderr, /in use/);
  await lxcOk(t, d.socket, 'network', 'acl', 'rule', 'remove', 'web2', 'ingress', 'protocol=icmp4');
  t.true(ping(a, `${subnet}.20`), 'removing the rule restores the traffic');
  await lxcOk(t, d.socket, 'network', 'acl', 'rule', 'add', 'web2', 'ingress', 'action=reject', 'protocol=icmp4');
  t.false(ping(a, `${subnet}.20`));
  await lxcOk(t, d.socket, 'network', 'unset', br, 'security.acls');
  t.true(ping(a, `${subnet}.20`), 'taking the ACL off the network restores the traffic');
  t.regex(await lxcOk(t, d.socket, 'network', 'acl', 'delete', 'web2'), /Network ACL web2 deleted/);
  t.is((await lxcOk(t, d.socket, 'network', 'acl', 'list', '--format', 'csv')).trim(), '');
});

test.serial('lxc network forward create/list/show/port add/port remove/edit/delete', async (t) => {
  const br = uniqueName();
  await lxcOk(t, d.socket, 'network', 'create', br, 'ipv4.address=auto', 'ipv6.address=none');
  const subnet = (YAML.parse(await lxcOk(t, d.socket, 'network', 'show', br)).config['ipv4.address'] as string).replace(/\.1\/24$/, '');
  const listen = `${subnet}.200`;
  const target = `${subnet}.20`;
  t.regex(await lxcOk(t, d.socket, 'network', 'forward', 'create', br, listen, `target_address=${subnet}.10`), new RegExp(`Network forward ${listen.replace(/\./g, '\\.')} created`));
  await lxcOk(t, d.socket, 'network', 'forward', 'port', 'add', br, listen, 'tcp', '80,81', target, '8080,8081');
  const mismatch = await lxc(d.socket, 'network', 'forward', 'port', 'add', br, listen, 'tcp', '90-92', target, '8090-8091');
  t.not(mismatch.status, 0);
  t.regex(mismatch.stderr, /do not pair up/);
  const dup = await lxc(d.socket, 'network', 'forward', 'create', br, listen);
  t.not(dup.status, 0);
  const shown = YAML.parse(await lxcOk(t, d.socket, 'network', 'forward', 'show', br, listen));
  t.is(shown.listen_address, listen);
  t.deepEqual(shown.config, { target_address: `${subnet}.10` });
  t.deepEqual(shown.ports, [{ description: '', protocol: 'tcp', listen_port: '80,81', target_port: '8080,8081', target_address: target }]);
  t.regex(await lxcOk(t, d.socket, 'network', 'forward', 'list', br, '--format', 'csv'), new RegExp(`^${listen.replace(/\./g, '\\.')},`, 'm'));
  t.regex(sh(NFT, ['list', 'table', 'inet', forwardTableName(dir)]).stdout, /tcp dport \{ 80, 81 \} dnat ip to tcp dport map \{ 80 : [\d.]+ \. 8080, 81 : [\d.]+ \. 8081 \}/);

  const edited = await lxcWithInput(d.socket, YAML.stringify({ ...shown, description: 'edited' }), 'network', 'forward', 'edit', br, listen);
  t.is(edited.status, 0, edited.stderr);
  t.is(YAML.parse(await lxcOk(t, d.socket, 'network', 'forward', 'show', br, listen)).description, 'edited');
  await lxcOk(t, d.socket, 'network', 'forward', 'port', 'remove', br, listen, 'tcp', '80,81');
  t.deepEqual(YAML.parse(await lxcOk(t, d.socket, 'network', 'forward', 'show', br, listen)).ports, []);
  await lxcOk(t, d.socket, 'network', 'forward', 'delete', br, listen);
  t.is((await lxcOk(t, d.socket, 'network', 'forward', 'list', br, '--format', 'csv')).trim(), '');

  // A network deleted with forwards takes them and their rules along.
  await lxcOk(t, d.socket, 'network', 'forward', 'create', br, listen, `target_address=${subnet}.10`);
  await lxcOk(t, d.socket, 'network', 'delete', br);
  t.is(sh(NFT, ['list', 'table', 'inet', forwardTableName(dir)]).stdout, '');
});
