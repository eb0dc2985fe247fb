/**
 * Networks through the real clients: lxc network create/list/show/info/edit/set/rename/delete and
 * list-leases (with a lease a namespace gets from the bridge's dnsmasq), pylxd's network calls,
 * and a daemon killed with SIGKILL that comes back to the same bridges, dnsmasq and rules.
 */
import test from 'ava';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { projectRoot, startDaemon, stopDaemons, waitFor, type Daemon } from '../helpers/daemon.js';
import { lxc, lxcOk, lxcWithInput, python } from '../helpers/clients.js';
import { NFT, dnsmasqPids, joinBridge, linkExists, nftRules, sh, uniqueName } from '../helpers/netns.js';

const tableOf = (dataDir: string) => `corral_${createHash('sha256').update(path.resolve(dataDir)).digest('hex').slice(0, 8)}`;

let d: Daemon;
const dir = mkdtempSync(path.join(tmpdir(), 'corral-networks-e2e-'));

test.before(async () => {
  d = await startDaemon({ plugins: 'edge', dir });
});

test.after.always(async () => {
  const left = (await d.request('GET', '/1.0/networks?recursion=1').catch(() => undefined))?.json?.metadata ?? [];
  for (const n of left) if (n.managed) await d.request('DELETE', `/1.0/networks/${n.name}`);
  await stopDaemons();
  sh(NFT, ['delete', 'table', 'inet', tableOf(dir)]);
  rmSync(dir, { recursive: true, force: true });
});

test.serial('lxc network create/list/show/info/set/edit/list-leases/rename/delete', async (t) => {
  const name = uniqueName();
  const renamed = uniqueName();
  t.regex(await lxcOk(t, d.socket, 'network', 'create', name, 'ipv4.address=auto', 'ipv6.address=none'), new RegExp(`Network ${name} created`));
  const list = await lxcOk(t, d.socket, 'network', 'list', '--format', 'csv');
  const row = list.split('\n').find((l) => l.startsWith(`${name},`))!;
  t.truthy(row, list);
  t.regex(row, /^[^,]+,bridge,YES,10\.\d+\.\d+\.1\/24,/);
  // lxc leaves loopback and unknown interfaces out of its table; the host's physical ones show unmanaged.
  t.regex(list, /^eth0,physical,NO,/m);

  const shown = YAML.parse(await lxcOk(t, d.socket, 'network', 'show', name));
  t.is(shown.name, name);
  t.is(shown.managed, true);
  t.is(shown.config['ipv4.nat'], 'true');
  const subnet = (shown.config['ipv4.address'] as string).replace(/\.1\/24$/, '');

  const info = await lxcOk(t, d.socket, 'network', 'info', name);
  t.regex(info, /Type: broadcast/);
  t.regex(info, new RegExp(`inet\\s+${subnet.replace(/\./g, '\\.')}\\.1/24`));
  t.regex(info, /Bridge:/);

  await lxcOk(t, d.socket, 'network', 'set', name, 'ipv4.dhcp.expiry', '2h');
  t.is(YAML.parse(await lxcOk(t, d.socket, 'network', 'show', name)).config['ipv4.dhcp.expiry'], '2h');
  const edited = await lxcWithInput(d.socket, YAML.stringify({ description: 'edited', config: { ...shown.config, 'ipv4.dhcp.expiry': '3h' } }), 'network', 'edit', name);
  t.is(edited.status, 0, edited.stderr);
  const after = YAML.parse(await lxcOk(t, d.socket, 'network', 'show', name));
  t.is(after.description, 'edited');
  t.is(after.config['ipv4.dhcp.expiry'], '3h');
  const bad = await lxc(d.socket, 'network', 'set', name, 'ipv4.dhcp.ranges', '10.9.9.2-10.9.9.20');
  t.not(bad.status, 0);
  t.regex(bad.stderr, /outside the network's subnet/);

  // A namespace plugged into the bridge gets a lease that list-leases shows.
  const ns = joinBridge(name);
  try {
    const lease = ns.dhcp();
    t.is(lease.lease, '10800');
    t.is(ns.exec(['busybox', 'ping', '-c', '1', '-W', '2', `${subnet}.1`]).status, 0);
    const leases = await lxcOk(t, d.socket, 'network', 'list-leases', name, '--format', 'csv');
    t.true(leases.split('\n').some((l) => l.includes(ns.mac) && l.includes(lease.ip!) && l.includes('DYNAMIC')), leases);
    t.true(leases.split('\n').some((l) => l.startsWith(`${name}.gw,`) && l.includes('GATEWAY')), leases);
  } finally {
    ns.remove();
  }

  t.is((await lxc(d.socket, 'network', 'create', name)).status, 1);
  await lxcOk(t, d.socket, 'network', 'rename', name, renamed);
  t.false(linkExists(name));
  t.true(linkExists(renamed));
  await lxcOk(t, d.socket, 'network', 'delete', renamed);
  t.false(linkExists(renamed));
  t.deepEqual(dnsmasqPids(path.join(dir, 'networks', renamed)), []);
});

test.serial('host interfaces are listed as the link monitor reports them: made, removed, and replaced under the same name by another kind', async (t) => {
  const name = `hl${process.pid % 100000}`;
  const listed = async () => {
    const all = (await d.request('GET', '/1.0/networks?recursion=1')).json.metadata as { name: string; type: string; managed: boolean }[];
    return all.find((n) => n.name === name);
  };
  try {
    t.is(await listed(), undefined);
    t.is(sh('ip', ['link', 'add', name, 'type', 'bridge']).status, 0);
    // Made outside the daemon: a kept listing holds until the monitor reports the link, a moment later.
    await waitFor(async () => (await listed()) !== undefined, 2_000, 'the new link listed');
    t.deepEqual(await listed(), { ...(await listed())!, name, type: 'bridge', managed: false }, 'made: listed');
    t.regex(await lxcOk(t, d.socket, 'network', 'list', '--format', 'csv'), new RegExp(`^${name},bridge,NO,`, 'm'));
    // The same name, another kind: only the link monitor tells (the names in /sys are the same).
    t.is(sh('ip', ['link', 'del', name]).status, 0);
    t.is(sh('ip', ['link', 'add', name, 'type', 'ifb']).status, 0);
    await waitFor(async () => (await listed())?.type === 'unknown', 2_000, 'the replacement shown with its own type');
    t.is(sh('ip', ['link', 'del', name]).status, 0);
    await waitFor(async () => (await listed()) === undefined, 2_000, 'the removed link gone');
  } finally {
    sh('ip', ['link', 'del', name]);
  }
});

test.serial('pylxd: create, exists, get, all, save and delete a network', async (t) => {
  const name = uniqueName();
  const renamed = uniqueName();
  const run = await python(path.join(projectRoot, 'test', 'e2e', 'pylxd_networks.py'), [d.socket, name, renamed]);
  t.is(run.status, 0, run.stderr);
  const seen = JSON.parse(run.stdout);
  t.true(seen.exists);
  t.true(seen.managed);
  t.is(seen.type, 'bridge');
  t.is(seen.description, 'from pylxd');
  t.regex(seen.ipv4, /^10\.\d+\.\d+\.1\/24$/);
  t.is(seen.nat, 'true');
  t.true(seen.all_names.includes(name));
  t.true(seen.all_names.includes('lo'));
  t.is(seen.expiry_after_save, '3h');
  t.is(seen.description_after_save, 'saved');
  t.false(seen.exists_other);
  t.false(seen.exists_after_delete);
  t.false(linkExists(name));
});

test.serial('kill -9 of the daemon, then restart: one bridge, one dnsmasq, rules once', async (t) => {
  const name = uniqueName();
  t.is((await d.request('POST', '/1.0/networks', { name, config: { 'ipv4.address': 'auto', 'ipv6.address': 'auto' } })).status, 200);
  const table = tableOf(dir);
  const rules = nftRules(table).filter((r) => r.includes(`.${name}:`));
  t.true(rules.length > 0);
  const [pid] = dnsmasqPids(path.join(dir, 'networks', name));
  d.child.kill('SIGKILL');
  await new Promise((r) => d.child.once('exit', r));
  await d.stop();
  d = await startDaemon({ plugins: 'edge', dir });
  t.deepEqual(dnsmasqPids(path.join(dir, 'networks', name)), [pid!], 'the running dnsmasq was adopted');
  t.deepEqual(nftRules(table).filter((r) => r.includes(`.${name}:`)), rules);
  t.true(linkExists(name));
  t.is((await d.request('GET', `/1.0/networks/${name}`)).json.metadata.status, 'Created');
  t.is((await d.request('DELETE', `/1.0/networks/${name}`)).status, 200);
  t.false(linkExists(name));
  t.deepEqual(nftRules(table).filter((r) => r.includes(`.${name}:`)), []);
});
