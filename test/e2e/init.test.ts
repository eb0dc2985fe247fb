/**
 * Init like the reference's `lxd init`, through the real daemon, `lxc` and `corrald init`:
 * `--init auto` (pool, managed bridge, NIC), preseeds with every section applied in the
 * reference's order, refusal of unknown sections and keys before any change, undo of a half-applied
 * preseed, and `--dump` fed back to a fresh daemon.
 */
import test from 'ava';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { execFileSync, spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { startDaemon, stopDaemons, waitFor, killContainers, type Daemon } from '../helpers/daemon.js';
import { lxc, lxcOk, hasLxc } from '../helpers/clients.js';
import { corraldInit, corraldUntilExit } from '../helpers/init-command.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { importImage } from '../helpers/api.js';
import { linkExists, uniqueName } from '../helpers/netns.js';
import { referenceUnavailable, startReference } from '../helpers/reference-daemon.js';

const work = mkdtempSync(path.join(tmpdir(), 'corral-init-'));
const images: BusyboxImage[] = [];
/** Bridges a test made on the host, removed at the end whatever happened. */
const bridges = new Set<string>();
test.after.always(async () => {
  await stopDaemons();
  for (const name of bridges) if (linkExists(name)) execFileSync('ip', ['link', 'delete', name]);
  for (const image of images) rmSync(image.dir, { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
});

const serial = hasLxc() ? test.serial : test.serial.skip;
const file = (name: string, text: string) => {
  const p = path.join(work, name);
  writeFileSync(p, text);
  return p;
};
const dump = async (d: Daemon) => {
  const out = await corraldInit(d.dir, ['--dump']);
  if (out.status !== 0) throw new Error(`dump failed: ${out.stderr}`);
  return out.stdout;
};
/** Removes a daemon's managed networks (bridges outlive a daemon stopped by SIGTERM). */
async function dropNetworks(d: Daemon): Promise<void> {
  const profile = (await d.request('GET', '/1.0/profiles/default')).json.metadata;
  for (const [name, dev] of Object.entries<any>(profile.devices ?? {})) {
    if (dev.type === 'nic') await lxc(d.socket, 'profile', 'device', 'remove', 'default', name);
  }
  for (const net of (await d.request('GET', '/1.0/networks?recursion=1')).json.metadata.filter((n: any) => n.managed)) {
    const del = await d.request('DELETE', `/1.0/networks/${net.name}`);
    if (del.status !== 200) throw new Error(`deleting ${net.name}: ${del.body}`);
  }
}

serial('a preseed creates pools and profiles and sets server config; applying it again changes nothing', async (t) => {
  const preseed = file('preseed.yaml', `config:
  user.site: lab
storage_pools:
- name: data
  driver: dir
  config:
    source: ${path.join(work, 'pool')}
profiles:
- name: default
  devices:
    root: {type: disk, path: /, pool: data}
- name: web
  description: web servers
  config:
    limits.memory: 64MiB
`);
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-init-data-'));
  let d = await startDaemon({ plugins: 'edge', dir, args: ['--init', preseed] });
  await waitFor(() => d.output().includes('init applied'), 15000, 'the preseed');
  t.is((await d.request('GET', '/1.0')).json.metadata.config['user.site'], 'lab');
  const pool = (await d.request('GET', '/1.0/storage-pools/data')).json.metadata;
  t.is(pool.driver, 'dir');
  t.is(pool.config.source, path.join(work, 'pool'));
  t.deepEqual((await d.request('GET', '/1.0/profiles/default')).json.metadata.devices.root, { type: 'disk', path: '/', pool: 'data' });
  t.regex(await lxcOk(t, d.socket, 'profile', 'show', 'web'), /limits\.memory: 64MiB/);
  const before = await dump(d);
  const etag = (await d.request('GET', '/1.0/profiles/web')).headers.etag;
  await d.stop();

  d = await startDaemon({ plugins: 'edge', dir, args: ['--init', preseed] });
  await waitFor(() => d.output().includes('init applied'), 15000, 'the preseed again');
  t.is((await d.request('GET', '/1.0/profiles/web')).headers.etag, etag, 'unchanged');
  t.is(await dump(d), before);
  await d.stop();
  rmSync(dir, { recursive: true, force: true });
});

serial('--init auto makes a dir pool, a bridge corralbr<N> (auto subnets, NAT) and an eth0 NIC on it in the default profile; a container gets a lease on it; auto again changes nothing', async (t) => {
  const image = buildBusyboxImage('gzip');
  images.push(image);
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-init-auto-'));
  // Unset: the operator's default, a bridge named corralbr<N>.
  const env = { CORRAL_INIT_NETWORK: '' };
  let d = await startDaemon({ plugins: 'edge', dir, args: ['--init', 'auto'], env });
  await waitFor(() => d.output().includes('init applied'), 20000, 'the auto init');
  const nets = JSON.parse(await lxcOk(t, d.socket, 'network', 'list', '--format', 'json')).filter((n: any) => n.managed);
  t.is(nets.length, 1);
  const net = nets[0];
  bridges.add(net.name);
  t.regex(net.name, /^corralbr\d+$/);
  t.is(net.type, 'bridge');
  t.regex(net.config['ipv4.address'], /^10\.\d+\.\d+\.1\/24$/);
  t.is(net.config['ipv4.nat'], 'true');
  t.regex(net.config['ipv6.address'], /^fd42:[0-9a-f:]+::1\/64$/);
  t.is(net.config['ipv6.nat'], 'true');
  t.true(linkExists(net.name), 'the bridge is on the host');
  const link = JSON.parse(execFileSync('ip', ['-j', 'link', 'show', net.name], { encoding: 'utf8' }))[0];
  t.true(link.flags.includes('UP'), 'the bridge is up');
  const profile = (await d.request('GET', '/1.0/profiles/default')).json.metadata;
  t.deepEqual(profile.devices, {
    root: { type: 'disk', path: '/', pool: 'default' },
    eth0: { type: 'nic', network: net.name, name: 'eth0' },
  });
  t.is((await d.request('GET', '/1.0/storage-pools/default')).json.metadata.driver, 'dir');

  // A container launched with no network options gets eth0 on the bridge, and a lease from its dnsmasq.
  await importImage(d, image.unified, 'bb');
  await lxcOk(t, d.socket, 'launch', 'bb', 'c1');
  const script = file('dhcp.sh', '#!/bin/sh\n[ "$1" = bound ] || [ "$1" = renew ] || exit 0\nip addr add "$ip/$mask" dev "$interface"\n');
  await lxcOk(t, d.socket, 'file', 'push', script, 'c1/bin/dhcp.sh', '--mode', '0755');
  const lease = await lxcOk(t, d.socket, 'exec', 'c1', '--', 'udhcpc', '-i', 'eth0', '-n', '-q', '-t', '5', '-s', '/bin/dhcp.sh');
  const gateway = net.config['ipv4.address'].split('/')[0];
  const address = /inet (\d+\.\d+\.\d+\.\d+)\//.exec(await lxcOk(t, d.socket, 'exec', 'c1', '--', 'ip', '-4', '-o', 'addr', 'show', 'eth0'));
  t.truthy(address, `c1 has an address after udhcpc: ${lease}`);
  t.is(address![1]!.split('.').slice(0, 3).join('.'), gateway.split('.').slice(0, 3).join('.'));
  await lxcOk(t, d.socket, 'exec', 'c1', '--', 'ping', '-c', '1', '-W', '3', gateway);
  await lxcOk(t, d.socket, 'delete', '--force', 'c1');

  const before = await dump(d);
  const etags = await Promise.all(['/1.0/profiles/default', `/1.0/networks/${net.name}`, '/1.0/storage-pools/default'].map(async (u) => (await d.request('GET', u)).headers.etag));
  await d.stop();
  d = await startDaemon({ plugins: 'edge', dir, args: ['--init', 'auto'], env });
  await waitFor(() => d.output().includes('init applied'), 20000, 'the auto init again');
  t.is(await dump(d), before, 'the second auto changed nothing');
  t.deepEqual(await Promise.all(['/1.0/profiles/default', `/1.0/networks/${net.name}`, '/1.0/storage-pools/default'].map(async (u) => (await d.request('GET', u)).headers.etag)), etags);
  // And through the subcommand on the running daemon.
  t.is((await corraldInit(d.dir, ['--auto'], { env })).status, 0);
  t.is(await dump(d), before);

  await dropNetworks(d);
  t.false(linkExists(net.name));
  killContainers(dir);
  await d.stop();
  rmSync(dir, { recursive: true, force: true });
});

serial('corrald init --auto with a managed network already there makes the pool and root disk but no network and no NIC', async (t) => {
  const d = await startDaemon({ plugins: 'edge' });
  const existing = uniqueName();
  const wouldBe = uniqueName();
  bridges.add(existing).add(wouldBe);
  await lxcOk(t, d.socket, 'network', 'create', existing, 'ipv4.address=none', 'ipv6.address=none');
  const run = await corraldInit(d.dir, ['--auto'], { env: { CORRAL_INIT_NETWORK: wouldBe } });
  t.is(run.status, 0, run.stderr);
  t.deepEqual((await d.request('GET', '/1.0/profiles/default')).json.metadata.devices, { root: { type: 'disk', path: '/', pool: 'default' } });
  t.deepEqual((await d.request('GET', '/1.0/networks?recursion=1')).json.metadata.filter((n: any) => n.managed).map((n: any) => n.name), [existing]);
  t.false(linkExists(wouldBe));

  // CORRAL_INIT_NETWORK=none: no network even when there is none.
  await dropNetworks(d);
  t.is((await corraldInit(d.dir, ['--auto'], { env: { CORRAL_INIT_NETWORK: 'none' } })).status, 0);
  t.deepEqual((await d.request('GET', '/1.0/networks?recursion=1')).json.metadata.filter((n: any) => n.managed), []);
  await d.stop();
});

serial('a preseed with every section (config, networks, storage_pools, profiles, projects) applied at start', async (t) => {
  const net = uniqueName();
  bridges.add(net);
  const preseed = file('every.yaml', `config:
  user.site: lab
  user.count: 12
networks:
- name: ${net}
  type: bridge
  description: lab bridge
  config:
    ipv4.address: 10.201.77.1/24
    ipv4.nat: true
    ipv6.address: none
storage_pools:
- name: data
  driver: dir
  description: lab data
  config:
    source: ${path.join(work, 'every-pool')}
profiles:
- name: default
  devices:
    root: {type: disk, path: /, pool: data}
    eth0: {type: nic, network: ${net}, name: eth0}
- name: small
  config:
    limits.memory: 64MiB
projects:
- name: lab
  description: the lab
  config:
    features.profiles: false
    user.owner: ops
cluster: null
`);
  const d = await startDaemon({ plugins: 'full', args: ['--init', preseed] });
  await waitFor(() => d.output().includes('init applied'), 20000, 'the preseed');
  const config = (await d.request('GET', '/1.0')).json.metadata.config;
  t.is(config['user.site'], 'lab');
  t.is(config['user.count'], '12', 'YAML numbers sent as their text');
  const shown = parse(await lxcOk(t, d.socket, 'network', 'show', net));
  t.like(shown, { description: 'lab bridge', managed: true, config: { 'ipv4.address': '10.201.77.1/24', 'ipv4.nat': 'true', 'ipv6.address': 'none' } });
  t.true(linkExists(net));
  t.like(parse(await lxcOk(t, d.socket, 'storage', 'show', 'data')), { driver: 'dir', description: 'lab data' });
  t.deepEqual(parse(await lxcOk(t, d.socket, 'profile', 'show', 'default')).devices, {
    root: { type: 'disk', path: '/', pool: 'data' },
    eth0: { type: 'nic', network: net, name: 'eth0' },
  });
  t.is(parse(await lxcOk(t, d.socket, 'profile', 'show', 'small')).config['limits.memory'], '64MiB');
  t.like(parse(await lxcOk(t, d.socket, 'project', 'show', 'lab')), { description: 'the lab', config: { 'features.profiles': 'false', 'user.owner': 'ops' } });
  await dropNetworks(d);
  await d.stop();
});

const REFUSED: [string, string, RegExp][] = [
  ['an unknown section', 'config:\n  user.a: b\nbogus: {}\n', /unknown preseed section "bogus"/],
  ['an unknown key in an item', 'profiles:\n- name: web\n  bogus: 1\n', /profiles\[0\] \(web\) has an unknown key "bogus"/],
  ['a config value of the wrong type', 'storage_pools:\n- name: p\n  driver: dir\n  config:\n    size: [1, 2]\n', /storage_pools\[0\] \(p\)\.config\.size must be a string, number or boolean, not a list/],
  ['a section of the wrong type', 'networks:\n  name: x\n', /networks must be a list, not a map/],
  ['an item without its name', 'projects:\n- description: x\n', /projects\[0\] needs a "name"/],
  ['a cluster section with an unknown key', 'cluster:\n  enabled: true\n  bogus: 1\n', /cluster has an unknown key "bogus"/],
  ['a cluster section whose enabled is not a boolean', 'cluster:\n  enabled: maybe\n', /cluster.enabled must be true or false/],
  ['text that is not YAML', 'config: [\n', /not valid YAML/],
];

serial('unknown sections, unknown keys and wrong types are refused with exit 1 before anything changes, at start and on a running daemon', async (t) => {
  const d = await startDaemon({ plugins: 'full' });
  const before = await dump(d);
  for (const [what, text, message] of REFUSED) {
    // Prefixed with valid sections, so a partial apply would show.
    const doc = `${text.startsWith('config:') ? '' : 'config:\n  user.first: x\n'}${text}`;
    const running = await corraldInit(d.dir, ['--preseed'], { input: doc });
    t.is(running.status, 1, `${what}: ${running.stderr}`);
    t.regex(running.stderr, message, what);
    const dir = path.join(work, `never-${REFUSED.findIndex((r) => r[0] === what)}`);
    const start = await corraldUntilExit(['--dir', dir, '--plugins', 'edge', '--init', file('refused.yaml', doc)]);
    t.is(start.status, 1, `${what} at start: ${start.stdout}${start.stderr}`);
    t.regex(start.stderr, message, `${what} at start`);
    t.false(existsSync(path.join(dir, 'corral.db')), 'the daemon never started');
  }
  t.is(await dump(d), before, 'nothing changed');
  await d.stop();
});

serial('a half-bad preseed is undone: config, pools, networks, projects and profiles as they were (corrald init --preseed)', async (t) => {
  const d = await startDaemon({ plugins: 'full' });
  const net = uniqueName();
  bridges.add(net);
  const base = path.join(work, 'half-base');
  const setup = await corraldInit(d.dir, ['--preseed', file('half-setup.yaml', `config:
  user.keep: one
storage_pools:
- name: base
  driver: dir
  description: first
  config: {source: ${base}}
profiles:
- name: default
  description: as it was
  devices:
    root: {type: disk, path: /, pool: base}
projects:
- name: p0
  description: before
  config: {user.x: "1"}
`)]);
  t.is(setup.status, 0, setup.stderr);
  const before = await dump(d);
  const extra = path.join(work, 'half-extra');
  const run = await corraldInit(d.dir, ['--preseed', '-'], { input: `config:
  user.keep: two
  user.new: added
storage_pools:
- name: base
  driver: dir
  description: changed
- name: extra
  driver: dir
  config: {source: ${extra}}
networks:
- name: ${net}
  config: {ipv4.address: none, ipv6.address: none}
projects:
- name: p0
  description: changed
  config: {user.x: "2"}
- name: p1
profiles:
- name: default
  description: changed
  devices:
    eth0: {type: nic, network: ${net}, name: eth0}
- name: fine
- name: broken
  devices:
    data: {type: disk, path: /data, source: /tmp, pool: nosuchpool}
` });
  t.is(run.status, 1);
  t.regex(run.stderr, /profile "broken"/);
  t.is(await dump(d), before, 'everything as before');
  t.false(linkExists(net), 'the bridge was removed from the host');
  t.false(existsSync(extra), 'the new pool was deleted');
  await d.stop();
});

serial('a half-bad preseed at start is undone and the daemon stops with exit 1; networks of a project are applied after the projects', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-init-half-'));
  const net = uniqueName();
  bridges.add(net);
  const preseed = file('half-start.yaml', `config:
  user.site: lab
storage_pools:
- name: data
  driver: dir
  config: {source: ${path.join(work, 'half-start-pool')}}
networks:
- name: ${net}
  config: {ipv4.address: none, ipv6.address: none}
- name: inlab
  project: lab
projects:
- name: lab
  config: {features.networks: true}
`);
  const run = await corraldUntilExit(['--dir', dir, '--plugins', 'full', '--init', preseed]);
  t.is(run.status, 1, run.stdout);
  // The project existed when its network was tried: the bridge driver refuses projects other than default.
  t.regex(run.stderr, /init failed: creating network "inlab" in project "lab": .*project other than "default"/);
  t.false(existsSync(path.join(dir, 'unix.socket')), 'the socket is gone');
  t.false(linkExists(net));
  const d = await startDaemon({ plugins: 'full', dir });
  t.is((await d.request('GET', '/1.0')).json.metadata.config['user.site'], undefined);
  t.deepEqual((await d.request('GET', '/1.0/storage-pools')).json.metadata, []);
  t.deepEqual((await d.request('GET', '/1.0/projects')).json.metadata, ['/1.0/projects/default']);
  t.deepEqual((await d.request('GET', '/1.0/networks?recursion=1')).json.metadata.filter((n: any) => n.managed), []);
  await d.stop();
  rmSync(dir, { recursive: true, force: true });
});

serial('corrald init --dump, fed back to a fresh daemon with --preseed, recreates config, networks, pools, profiles and projects', async (t) => {
  const net = uniqueName();
  bridges.add(net);
  const source = path.join(work, 'round-pool');
  const a = await startDaemon({ plugins: 'full' });
  const setup = await corraldInit(a.dir, ['--preseed', file('round.yaml', `config:
  user.site: round
  core.trust_password: s3cret
networks:
- name: ${net}
  description: round bridge
  config: {ipv4.address: auto, ipv6.address: none}
storage_pools:
- name: data
  driver: dir
  description: round data
  config: {source: ${source}}
profiles:
- name: default
  devices:
    root: {type: disk, path: /, pool: data}
    eth0: {type: nic, network: ${net}, name: eth0}
- name: web
  description: web
  config: {limits.cpu: "1"}
projects:
- name: lab
  description: the lab
  config: {features.images: false, user.owner: ops}
`)]);
  t.is(setup.status, 0, setup.stderr);
  const dumped = await dump(a);
  const doc = parse(dumped);
  t.deepEqual(Object.keys(doc), ['config', 'networks', 'storage_pools', 'profiles', 'projects'], 'the reference dump\'s sections, in its order');
  t.regex(doc.networks[0].config['ipv4.address'], /^10\./, 'the subnet picked, not auto');
  t.is(doc.config['user.site'], 'round');
  t.false('core.trust_password' in doc.config, 'a write-only key, shown as true, is not dumped');
  // The fresh daemon takes over the bridge's name and the pool's directory.
  await dropNetworks(a);
  await a.stop();
  rmSync(source, { recursive: true, force: true });

  const b = await startDaemon({ plugins: 'full' });
  const applied = await corraldInit(b.dir, ['--preseed'], { input: dumped });
  t.is(applied.status, 0, applied.stderr);
  t.is(await dump(b), dumped);
  await dropNetworks(b);
  await b.stop();
});

(referenceUnavailable() ? test.serial.skip : serial)('the reference takes our dump as its own preseed (lxd init --preseed)', async (t) => {
  const d = await startDaemon({ plugins: 'edge' });
  await lxcOk(t, d.socket, 'profile', 'create', 'h16init-web');
  await lxcOk(t, d.socket, 'profile', 'set', 'h16init-web', 'limits.memory', '64MiB');
  await lxcOk(t, d.socket, 'config', 'set', 'user.h16init', 'yes');
  const dumped = await dump(d);
  await d.stop();
  const ref = await startReference();
  try {
    const hostPath = (process.env.PATH ?? '').split(':').filter((p) => !p.includes('node_modules')).join(':');
    const applied = await new Promise<{ status: number | null; stderr: string }>((resolve) => {
      const child = spawn('lxd', ['init', '--preseed'], { env: { ...process.env, PATH: hostPath, LXD_DIR: ref.dir } });
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => (stderr += c));
      child.on('exit', (status) => resolve({ status, stderr }));
      child.stdin.end(dumped);
    });
    t.is(applied.status, 0, applied.stderr);
    t.is(parse((await ref.lxc('profile', 'show', 'h16init-web')).stdout).config['limits.memory'], '64MiB');
    t.is((await ref.request('GET', '/1.0')).json.metadata.config['user.h16init'], 'yes');
  } finally {
    await ref.stop();
  }
});

serial('corrald init: a usage mistake exits 2, no daemon or an unreadable file exits 1, a section the plugin set does not serve is refused before any change', async (t) => {
  const none = await corraldInit(path.join(work, 'no-daemon'), []);
  t.is(none.status, 2);
  t.regex(none.stderr, /say what to do: --auto, --preseed or --dump/);
  const both = await corraldInit(path.join(work, 'no-daemon'), ['--auto', '--dump']);
  t.is(both.status, 2);
  t.regex(both.stderr, /--auto and --dump cannot be used together/);
  const absent = await corraldInit(path.join(work, 'no-daemon'), ['--dump']);
  t.is(absent.status, 1);
  t.regex(absent.stderr, /no daemon answers on .*no-daemon\/unix\.socket/);
  const unreadable = await corraldInit(path.join(work, 'no-daemon'), ['--preseed', path.join(work, 'missing.yaml')]);
  t.is(unreadable.status, 1);
  t.regex(unreadable.stderr, /cannot read the preseed .*missing\.yaml/);

  const d = await startDaemon({ plugins: 'edge' });
  const before = await dump(d);
  const run = await corraldInit(d.dir, ['--preseed'], { input: 'config:\n  user.a: b\nprofiles:\n- name: p\nprojects:\n- name: lab\n' });
  t.is(run.status, 1);
  t.regex(run.stderr, /the preseed has projects but this daemon does not serve \/1\.0\/projects/);
  t.is(await dump(d), before);
  await d.stop();
});
