/**
 * The check with two real containers on one managed bridge (full set): an ACL dropping
 * ICMP between them takes effect, and taking it off the network restores it. Traffic stays on the
 * bridge this test makes.
 */
import test from 'ava';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { startDaemon, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { buildBusyboxImage } from '../helpers/busybox-image.js';
import { callAndWait, importImage } from '../helpers/api.js';
import { NFT, sh, uniqueName } from '../helpers/netns.js';
import { aclTableName } from '../../plugins/network-acls/firewall.js';

let d: Daemon;
const br = uniqueName();

const call = (method: string, url: string, body?: unknown) => callAndWait(d, method, url, body);
const inside = (name: string, script: string) => {
  const r = spawnSync('lxc-attach', ['-n', name, '-P', path.join(d.dir, 'containers'), '--clear-env', '--', '/bin/sh', '-c', script], { encoding: 'utf8', timeout: 20000 });
  return { code: r.status ?? -1, out: `${r.stdout}${r.stderr}` };
};

test.before(async () => {
  d = await startDaemon({ plugins: 'full', args: ['--init', 'auto'] });
  await waitFor(async () => (await d.request('GET', '/1.0/storage-pools')).json?.metadata?.length === 1, 10000, 'the init pool');
  await importImage(d, buildBusyboxImage('gzip').unified, 'bb');
});

test.after.always(async () => {
  for (const c of ['c1', 'c2']) {
    await call('PUT', `/1.0/instances/${c}/state`, { action: 'stop', force: true }).catch(() => undefined);
    await call('DELETE', `/1.0/instances/${c}`).catch(() => undefined);
  }
  await d.request('DELETE', `/1.0/networks/${br}`).catch(() => undefined);
  await stopDaemons();
  sh(NFT, ['delete', 'table', 'inet', aclTableName(d.dir)]);
});

test.serial('network_bridge_acl: an ACL dropping ICMP between two containers on one bridge takes effect; its removal restores it', async (t) => {
  const made = await d.request('POST', '/1.0/networks', { name: br, config: { 'ipv4.address': 'auto', 'ipv6.address': 'none' } });
  t.is(made.status, 200, JSON.stringify(made.json));
  const subnet = ((await d.request('GET', `/1.0/networks/${br}`)).json.metadata.config['ipv4.address'] as string).replace(/\.1\/24$/, '');
  const addr: Record<string, string> = { c1: `${subnet}.11`, c2: `${subnet}.12` };
  for (const c of ['c1', 'c2']) {
    const res = await call('POST', '/1.0/instances', { name: c, source: { type: 'image', alias: 'bb' }, devices: { eth0: { type: 'nic', network: br, name: 'eth0' } } });
    t.is(res.op?.status, 'Success', JSON.stringify(res.op ?? res.json));
    t.is((await call('PUT', `/1.0/instances/${c}/state`, { action: 'start' })).op?.status, 'Success');
    inside(c, `ip link set eth0 up; ip addr add ${addr[c]}/24 dev eth0`);
  }
  const pings = () => inside('c1', `ping -c 1 -W 1 ${addr.c2}`).code === 0;
  await waitFor(pings, 10000, 'c1 reaching c2');

  t.is((await d.request('POST', '/1.0/network-acls', { name: 'no-ping', ingress: [{ action: 'drop', protocol: 'icmp4', state: 'enabled' }] })).status, 200);
  const set = await d.request('PATCH', `/1.0/networks/${br}`, { config: { 'security.acls': 'no-ping', 'security.acls.default.ingress.action': 'allow', 'security.acls.default.egress.action': 'allow' } });
  t.is(set.status, 200, JSON.stringify(set.json));
  t.false(pings(), 'ICMP between the containers is dropped');
  t.is((await d.request('PATCH', `/1.0/networks/${br}`, { config: { 'security.acls': '' } })).status, 200);
  t.true(pings(), 'taking the ACL off restores it');
  t.is((await d.request('DELETE', '/1.0/network-acls/no-ping')).status, 200);
});
