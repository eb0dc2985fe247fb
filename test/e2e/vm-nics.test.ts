/**
 * A VM's graphical console and its NICs beyond a tap at start, through the real `lxc` client:
 * - `lxc console --type=vga` (no SPICE viewer installed: lxc serves a local socket and says where)
 *   reaches QEMU's SPICE server (its link reply starts with "REDQ"), one connection per channel;
 *   the same through the API's websocket operation; `vga` on a container is refused as the
 *   reference refuses it.
 * - A NIC hot-plugged on a managed bridge gets a DHCP lease (seen in `lxc network list-leases`),
 *   and is gone from the guest and the host once removed.
 * - macvlan NICs (a `parent` the test makes, and a managed macvlan network) become macvtap
 *   interfaces: the guest sees each with its volatile MAC address, hot-plugged and at start.
 * Only one VM runs (1 vCPU, 256 MiB); every link the test makes is a bridge of its own.
 */
import test from 'ava';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { startWithPool, stopDaemons, unixWebsocket, waitFor, type Daemon } from '../helpers/daemon.js';
import { lxc, lxcEnv } from '../helpers/clients.js';
import { uniqueName } from '../helpers/netns.js';
import { importTestVmImage, vmProblem } from '../helpers/vm-image.js';
import { serialUnless } from '../helpers/needs.js';
import { referenceUnavailable, startReference } from '../helpers/reference-daemon.js';

const skip = vmProblem();
const serial = skip ? test.serial.skip : test.serial;
if (skip) console.warn(`Skipping VM consoles and NICs: ${skip}`);

let d: Daemon;
const bridge = uniqueName();
const parent = uniqueName('p');
const macvlanNet = uniqueName('m');

test.before(async () => {
  if (skip) return;
  d = await startWithPool({ plugins: 'full', env: { CORRAL_QEMU_ACCEL: 'tcg' } });
  await importTestVmImage(d.socket, 'vm');
  const created = await lxc(d.socket, 'network', 'create', bridge, 'ipv4.address=auto', 'ipv4.nat=false', 'ipv6.address=none');
  if (created.status !== 0) throw new Error(`network create failed: ${created.stderr}`);
  // The macvlan parent: a bridge with no port, so nothing the guests send leaves it.
  for (const args of [['link', 'add', parent, 'type', 'bridge'], ['link', 'set', parent, 'up']]) {
    const r = spawnSync('ip', args, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr}`);
  }
  const launch = await lxc(d.socket, 'launch', 'vm', 'x1', '--vm', '-n', bridge, '-c', 'limits.memory=256MiB', '-c', 'limits.cpu=1');
  if (launch.status !== 0) throw new Error(`launch failed: ${launch.stderr}`);
  await waitFor(async () => (await lxc(d.socket, 'exec', 'x1', '--', 'true')).status === 0, 120_000, 'the VM agent').catch(async (err: Error) => {
    const log = (await lxc(d.socket, 'console', 'x1', '--show-log')).stdout;
    throw new Error(`${err.message}; console log ends with:\n${log.slice(-3000)}`);
  });
});

test.after.always(async () => {
  if (skip) return;
  await lxc(d.socket, 'delete', '--force', 'x1');
  await lxc(d.socket, 'delete', '--force', 'c1');
  await lxc(d.socket, 'network', 'delete', macvlanNet);
  await lxc(d.socket, 'network', 'delete', bridge);
  spawnSync('ip', ['link', 'del', parent]);
  await stopDaemons();
});

/** A SPICE link message for the main channel, no capabilities. */
function spiceLink(): Buffer {
  const b = Buffer.alloc(16 + 18);
  b.write('REDQ', 0);
  b.writeUInt32LE(2, 4); // major
  b.writeUInt32LE(2, 8); // minor
  b.writeUInt32LE(18, 12); // size of what follows
  b.writeUInt32LE(0, 16); // connection id
  b.writeUInt8(1, 20); // channel type: main
  b.writeUInt8(0, 21); // channel id
  b.writeUInt32LE(0, 22); // common caps
  b.writeUInt32LE(0, 26); // channel caps
  b.writeUInt32LE(18, 30); // caps offset
  return b;
}

/**
 * The first bytes the SPICE server answers a link message with, through a local socket, and that
 * connection, still open: lxc tears its socket down once no connection is left (as a viewer's main
 * channel, it must stay open while the others are made).
 */
function spiceReplyOverSocket(socketPath: string): Promise<{ reply: Buffer; connection: net.Socket }> {
  return new Promise((resolve, reject) => {
    const s = net.connect(socketPath);
    const timer = setTimeout(() => { s.destroy(); reject(new Error('no SPICE reply')); }, 15_000);
    let got = Buffer.alloc(0);
    s.on('connect', () => s.write(spiceLink()));
    s.on('data', (chunk) => {
      got = Buffer.concat([got, chunk]);
      if (got.length >= 16) { clearTimeout(timer); resolve({ reply: got, connection: s }); }
    });
    s.on('error', (err) => { clearTimeout(timer); reject(err); });
  });
}

/** The MAC addresses of the guest's interfaces, read through the agent. */
async function guestMacs(): Promise<string[]> {
  const r = await lxc(d.socket, 'exec', 'x1', '--', 'sh', '-c', 'cat /sys/class/net/*/address');
  return r.status === 0 ? r.stdout.split('\n').map((l) => l.trim()).filter(Boolean) : [];
}

const volatile = async (key: string) => (await d.request('GET', '/1.0/instances/x1')).json.metadata.config[key] as string;
/** The macvtap interfaces stacked on the test's parent bridge. */
const macvtapsOnParent = () => readdirSync(`/sys/class/net/${parent}`).filter((f) => f.startsWith('upper_')).map((f) => f.slice('upper_'.length));

serial('lxc console --type=vga (console_vga_type) without a viewer serves the VM\'s SPICE server on a local socket (one connection per channel); vga on a container is a 400', async (t) => {
  const client = spawn('lxc', ['console', 'x1', '--type=vga'], { env: lxcEnv(d.socket) });
  let out = '';
  client.stdout.on('data', (c: Buffer) => (out += c));
  client.stderr.on('data', (c: Buffer) => (out += c));
  try {
    await waitFor(() => /spice\+unix:\/\/\S+/.test(out), 15_000, 'lxc naming the SPICE socket');
    t.regex(out, /neither could be found/, 'lxc says no viewer is installed');
    const socketPath = /spice\+unix:\/\/(\S+)/.exec(out)![1]!;
    // lxc names its socket before it listens on it: on a loaded machine the file comes a little later.
    await waitFor(() => existsSync(socketPath), 15_000, 'lxc listening on its SPICE socket');
    const asked = Date.now();
    const first = await spiceReplyOverSocket(socketPath);
    t.log(`SPICE link reply through lxc and the daemon: ${Date.now() - asked} ms`);
    t.is(first.reply.subarray(0, 4).toString(), 'REDQ', 'the SPICE server\'s link reply');
    t.is(first.reply.readUInt32LE(4), 2, 'SPICE protocol 2');
    // A viewer opens several channels, the first still open: each is a new websocket on the same secret.
    const second = await spiceReplyOverSocket(socketPath);
    t.is(second.reply.subarray(0, 4).toString(), 'REDQ');
    for (const { connection } of [second, first]) connection.destroy();
  } catch (err) {
    // Seen once in a loaded suite run: lxc's socket gone before the first connection (its operation had ended).
    t.log(`lxc console printed: ${out}`);
    t.log(`the daemon about the console: ${d.output().split('\n').filter((l) => /console|spice|websocket|operation/i.test(l)).slice(-15).join('\n')}`);
    throw err;
  } finally {
    client.kill('SIGINT');
  }

  // A container has no graphical console: refused before anything else, as the reference does.
  t.is((await lxc(d.socket, 'init', '--empty', 'c1')).status, 0);
  const refused = await d.request('POST', '/1.0/instances/c1/console', { type: 'vga' });
  t.is(refused.status, 400);
  t.is(refused.json.error, 'VGA console is only supported by virtual machines');
  const bogus = await d.request('POST', '/1.0/instances/x1/console', { type: 'vnc' });
  t.is(bogus.status, 400);
  t.is(bogus.json.error, 'Unknown console type "vnc"');
});

const withReference = serialUnless(vmProblem() ?? referenceUnavailable());

withReference('the reference answers vga on a container and an unknown console type with the same status and message', async (t) => {
  // The container of the test before, made here when this test runs alone.
  if ((await lxc(d.socket, 'info', 'c1')).status !== 0) t.is((await lxc(d.socket, 'init', '--empty', 'c1')).status, 0);
  const ref = await startReference();
  try {
    const init = await ref.lxc('init', '--empty', 'c1');
    t.is(init.status, 0, init.stderr);
    for (const body of [{ type: 'vga' }, { type: 'vnc' }]) {
      const theirs = await ref.request('POST', '/1.0/instances/c1/console', body);
      const ours = await d.request('POST', '/1.0/instances/c1/console', body);
      t.is(ours.status, theirs.status, JSON.stringify(body));
      t.is(ours.json.error, theirs.json.error);
    }
  } finally {
    await ref.stop();
  }
});

serial('POST /console {"type":"vga"}: the data websocket relays the SPICE stream both ways; closing the control socket ends the operation', async (t) => {
  const r = await d.request('POST', '/1.0/instances/x1/console', { type: 'vga', width: 0, height: 0 });
  t.is(r.status, 202, JSON.stringify(r.json));
  const op = r.json.metadata;
  const fds = op.metadata.fds as Record<string, string>;
  t.deepEqual(Object.keys(fds).sort(), ['0', 'control']);
  const control = await unixWebsocket(d.socket, `/1.0/operations/${op.id}/websocket?secret=${fds.control}`);
  const data = await unixWebsocket(d.socket, `/1.0/operations/${op.id}/websocket?secret=${fds['0']}`);
  const reply = new Promise<Buffer>((resolve, reject) => {
    let got = Buffer.alloc(0);
    data.on('message', (m: Buffer) => {
      got = Buffer.concat([got, m]);
      if (got.length >= 16) resolve(got);
    });
    setTimeout(() => reject(new Error('no SPICE reply over the websocket')), 15_000).unref();
  });
  data.send(spiceLink());
  const got = await reply;
  t.is(got.subarray(0, 4).toString(), 'REDQ');
  data.close();
  control.close();
  await waitFor(async () => (await d.request('GET', `/1.0/operations/${op.id}`)).json.metadata?.status === 'Success', 10_000, 'the console operation to end');
});

serial('a NIC hot-plugged on a managed bridge gets a DHCP lease in the guest; removed, it leaves the guest and its tap leaves the host', async (t) => {
  const plugging = Date.now();
  const plug = await lxc(d.socket, 'config', 'device', 'add', 'x1', 'eth1', 'nic', `network=${bridge}`, 'name=eth1');
  t.is(plug.status, 0, plug.stderr);
  t.log(`tap hot-plug (lxc config device add): ${Date.now() - plugging} ms`);
  const hwaddr = await volatile('volatile.eth1.hwaddr');
  const tap = await volatile('volatile.eth1.host_name');
  t.true(existsSync(`/sys/class/net/${bridge}/brif/${tap}`), 'the tap is on the bridge');
  await waitFor(async () => (await guestMacs()).includes(hwaddr), 30_000, 'the guest seeing the new card');
  // The guest's init runs DHCP on eth0 only: the new card asks for a lease by hand.
  const dhcp = await lxc(d.socket, 'exec', 'x1', '--', 'sh', '-c',
    `for i in /sys/class/net/*; do if [ "$(cat $i/address)" = "${hwaddr}" ]; then n=\${i##*/}; fi; done; ip link set "$n" up && udhcpc -i "$n" -n -q -t 10 -s /usr/share/udhcpc/default.script && ip -4 addr show "$n"`);
  t.is(dhcp.status, 0, dhcp.stderr + dhcp.stdout);
  t.regex(dhcp.stdout, /inet \d+\.\d+\.\d+\.\d+/, 'the new interface has an address');
  await waitFor(async () => (await lxc(d.socket, 'network', 'list-leases', bridge, '--format', 'csv')).stdout.includes(hwaddr), 30_000, 'the lease');
  t.regex((await lxc(d.socket, 'network', 'list-leases', bridge, '--format', 'csv')).stdout, new RegExp(`x1,${hwaddr},[0-9.]+,DYNAMIC`));

  const unplug = await lxc(d.socket, 'config', 'device', 'remove', 'x1', 'eth1');
  t.is(unplug.status, 0, unplug.stderr);
  t.false(existsSync(`/sys/class/net/${tap}`), 'the tap is gone');
  t.false((await guestMacs()).includes(hwaddr), 'the guest lost the card');
  t.true((await guestMacs()).includes(await volatile('volatile.eth0.hwaddr')), 'eth0 stays');
});

serial('macvlan NICs become macvtaps on their parent: hot-plugged and at start, the guest sees their MAC addresses; removed, the macvtap goes', async (t) => {
  const plugging = Date.now();
  const plug = await lxc(d.socket, 'config', 'device', 'add', 'x1', 'mv0', 'nic', 'nictype=macvlan', `parent=${parent}`, 'name=eth2');
  t.is(plug.status, 0, plug.stderr);
  t.log(`macvtap hot-plug (lxc config device add): ${Date.now() - plugging} ms`);
  const mac0 = await volatile('volatile.mv0.hwaddr');
  t.truthy(mac0);
  t.is(macvtapsOnParent().length, 1, 'a macvtap on the parent');
  const mvt = macvtapsOnParent()[0];
  t.true(existsSync(`/sys/class/net/${mvt}/macvtap`), 'it is a macvtap');
  t.is(readFileSync(`/sys/class/net/${mvt}/address`, 'utf8').trim(), mac0, 'with the NIC\'s MAC address');
  await waitFor(async () => (await guestMacs()).includes(mac0), 30_000, 'the guest seeing the macvtap card');
  t.log(`until the guest lists the macvtap card: ${Date.now() - plugging} ms`);
  // QEMU holds the macvtap's character device.
  const pid = Number(readFileSync(path.join(d.dir, 'qemu', 'x1', 'qemu.pid'), 'utf8'));
  const index = readFileSync(`/sys/class/net/${mvt}/ifindex`, 'utf8').trim();
  const held = readdirSync(`/proc/${pid}/fd`).map((fd) => {
    try { return readlinkSync(`/proc/${pid}/fd/${fd}`); } catch { return ''; }
  });
  t.true(held.includes(`/dev/tap${index}`), 'QEMU holds the macvtap\'s /dev/tapN');

  // A managed macvlan network's NIC, and both at the next start.
  t.is((await lxc(d.socket, 'stop', 'x1', '--force')).status, 0);
  t.deepEqual(macvtapsOnParent(), [], 'the macvtap goes with the VM');
  const created = await lxc(d.socket, 'network', 'create', macvlanNet, '--type=macvlan', `parent=${parent}`);
  t.is(created.status, 0, created.stderr);
  t.is((await lxc(d.socket, 'config', 'device', 'add', 'x1', 'mv1', 'nic', `network=${macvlanNet}`, 'name=eth3')).status, 0);
  const mac1 = await volatile('volatile.mv1.hwaddr');
  const start = await lxc(d.socket, 'start', 'x1');
  t.is(start.status, 0, start.stderr);
  t.is(macvtapsOnParent().length, 2, 'two macvtaps at start');
  await waitFor(async () => {
    const macs = await guestMacs();
    return macs.includes(mac0) && macs.includes(mac1);
  }, 90_000, 'the guest seeing both macvlan cards');

  const unplugging = Date.now();
  const unplug = await lxc(d.socket, 'config', 'device', 'remove', 'x1', 'mv0');
  t.log(`unplug of a NIC present at start (lxc config device remove): ${Date.now() - unplugging} ms`);
  t.is(unplug.status, 0, unplug.stderr);
  t.is(macvtapsOnParent().length, 1, 'the unplugged macvtap is gone');
  t.false((await guestMacs()).includes(mac0), 'the guest lost that card');
  t.true((await guestMacs()).includes(mac1));

  // A parent that does not exist is a clear 400 and nothing is left behind.
  const bad = await lxc(d.socket, 'config', 'device', 'add', 'x1', 'mv2', 'nic', 'nictype=macvlan', 'parent=nosuchlink0', 'name=eth4');
  t.not(bad.status, 0);
  t.regex(bad.stderr, /parent interface "nosuchlink0" does not exist/);
  t.is(macvtapsOnParent().length, 1);
  t.is((await lxc(d.socket, 'stop', 'x1', '--force')).status, 0);
  t.deepEqual(macvtapsOnParent(), []);
});
