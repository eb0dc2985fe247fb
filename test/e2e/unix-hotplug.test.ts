/**
 * Devices that follow the host's kernel, through the real `lxc` client on real containers:
 * unix-hotplug (nodes matched by vendor/product ids or subsystem, given at start and as the kernel
 * announces them; ownership.inherit) and unix-block with required=false (its source given when it
 * appears, taken back when it goes), across a daemon restart. The host devices are loop devices
 * the test makes and removes through /dev/loop-control, and the machine's own virtio disk (read
 * only) for vendor and product ids. No udev daemon runs here: only the kernel's announcements.
 */
import test from 'ava';
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startDaemon, waitFor, type Daemon } from '../helpers/daemon.js';
import { startBusyboxDaemon, stopBusyboxDaemon, type BusyboxDaemon } from '../helpers/busybox-daemon.js';
import { lxc, lxcOk } from '../helpers/clients.js';
import { processesWith } from '../helpers/processes.js';

let d: Daemon;
let setting: BusyboxDaemon;
const scratch = mkdtempSync(path.join(tmpdir(), 'u8-hotplug-'));
const madeLoops = new Set<number>();

const run = (t: any, ...args: string[]) => lxcOk(t, d.socket, ...args);
const inside = (name: string, ...command: string[]) => lxc(d.socket, 'exec', name, '--', ...command);
const hasLoopControl = existsSync('/dev/loop-control');

/** LOOP_CTL_ADD / LOOP_CTL_REMOVE of one loop device by number: a real add or remove announcement. */
function loopControl(op: 'add' | 'remove', n: number): void {
  const request = op === 'add' ? '0x4C80' : '0x4C81';
  execFileSync('/usr/bin/python3', ['-c', `import fcntl,os; fd=os.open('/dev/loop-control',os.O_RDWR); fcntl.ioctl(fd,${request},${n})`]);
  if (op === 'add') madeLoops.add(n);
  else madeLoops.delete(n);
}

/** A loop number nobody uses (the test's own range, far above what losetup --find hands out). */
function freeLoop(): number {
  for (let n = 230; n < 250; n++) if (!existsSync(`/sys/block/loop${n}`) && !madeLoops.has(n)) return n;
  throw new Error('no free loop number in 230-249');
}

/** The machine's virtio disk and its ids as sysfs gives them, if it has one. */
function virtioDisk(): { name: string; vendor: string; product: string } | undefined {
  for (const name of readdirSync('/sys/block')) {
    try {
      const vendor = readFileSync(`/sys/block/${name}/device/vendor`, 'utf8').trim().replace(/^0x/, '');
      const product = readFileSync(`/sys/block/${name}/device/device`, 'utf8').trim().replace(/^0x/, '');
      if (vendor === '1af4') return { name, vendor, product };
    } catch {
      // not a virtio device
    }
  }
  return undefined;
}

async function nodeInside(name: string, node: string): Promise<string | undefined> {
  const r = await inside(name, 'stat', '-c', '%F %t:%T %a %u:%g', node);
  return r.status === 0 ? r.stdout.trim() : undefined;
}

/** The uevent helper processes of the daemon under test. */
const ueventHelpers = () => processesWith('corral-uevents').filter((p) => {
  try {
    return Number(readFileSync(`/proc/${p.pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]) === d.child.pid;
  } catch {
    return false;
  }
});

test.before(async () => {
  setting = await startBusyboxDaemon('corral-u8-', 'full');
  d = setting.d;
});

test.after.always(async () => {
  if (setting) await stopBusyboxDaemon({ ...setting, d });
  for (const n of [...madeLoops]) {
    spawnSync('losetup', ['-d', `/dev/loop${n}`]);
    try {
      loopControl('remove', n);
    } catch {
      // already gone
    }
  }
  rmSync(scratch, { recursive: true, force: true });
});

test.serial('unix_hotplug_devices: bad options are refused with a 400 naming them, and nothing is added', async (t) => {
  await run(t, 'init', 'bb', 'u8bad');
  for (const [args, message] of [
    [['vendorid=xyz1'], /vendorid.*4 hexadecimal digits/],
    [['productid=12345'], /productid/],
    [['subsystem=a/b'], /subsystem/],
    [['uid=1000'], /need "vendorid", "productid" or "subsystem"/],
    [['subsystem=block', 'mode=999'], /mode/],
    [['subsystem=block', 'ownership.inherit=maybe'], /ownership\.inherit/],
    [['subsystem=block', 'bogus=1'], /bogus/],
  ] as [string[], RegExp][]) {
    const r = await lxc(d.socket, 'config', 'device', 'add', 'u8bad', 'h', 'unix-hotplug', ...args);
    t.not(r.status, 0, args.join(' '));
    t.regex(r.stderr, message);
  }
  t.deepEqual(Object.keys((await d.request('GET', '/1.0/instances/u8bad')).json.metadata.devices), []);
  const vm = await d.request('POST', '/1.0/instances', { name: 'u8vm', type: 'virtual-machine', source: { type: 'none' }, devices: { h: { type: 'unix-hotplug', subsystem: 'block' } } });
  t.is(vm.status, 400);
  t.regex(vm.json.error, /only supported on containers/);
  // required=true with nothing matching: the start fails, naming the device, and the container stays stopped.
  await run(t, 'config', 'device', 'add', 'u8bad', 'h', 'unix-hotplug', 'vendorid=ffff', 'productid=fffe', 'required=true');
  const start = await lxc(d.socket, 'start', 'u8bad');
  t.not(start.status, 0);
  t.regex(start.stderr, /Device "h": no host device matches it/);
  t.is((await d.request('GET', '/1.0/instances/u8bad')).json.metadata.status, 'Stopped');
  await run(t, 'delete', 'u8bad');
});

test.serial('unix_hotplug_devices: matched by vendorid and productid, the host virtio disk is readable inside; removed live', async (t) => {
  const disk = virtioDisk();
  if (!disk) return t.pass('this machine has no virtio disk to match by ids');
  await run(t, 'launch', 'bb', 'u8ids');
  await run(t, 'config', 'device', 'add', 'u8ids', 'vd', 'unix-hotplug', `vendorid=${disk.vendor}`, `productid=${disk.product}`, 'mode=0440');
  const [major, minor] = readFileSync(`/sys/block/${disk.name}/dev`, 'utf8').trim().split(':').map(Number);
  t.is(await nodeInside('u8ids', `/dev/${disk.name}`), `block special file ${major!.toString(16)}:${minor!.toString(16)} 440 0:0`);
  const host = execFileSync('sh', ['-c', `dd if=/dev/${disk.name} bs=4096 count=1 2>/dev/null | md5sum`], { encoding: 'utf8' }).split(' ')[0];
  t.is((await inside('u8ids', 'sh', '-c', `dd if=/dev/${disk.name} bs=4096 count=1 2>/dev/null | md5sum`)).stdout.split(' ')[0], host);
  // A partition has no ids of its own: the nearest device's are its (as udev's ID_VENDOR_ID).
  const other = await lxc(d.socket, 'config', 'device', 'add', 'u8ids', 'none', 'unix-hotplug', 'vendorid=ffff');
  t.is(other.status, 0, other.stderr);
  await run(t, 'config', 'device', 'remove', 'u8ids', 'vd');
  t.is(await nodeInside('u8ids', `/dev/${disk.name}`), undefined);
  await run(t, 'delete', '--force', 'u8ids');
});

test.serial('unix_hotplug_devices: a loop device the kernel announces appears in the running container, usable, and goes when removed', async (t) => {
  if (!hasLoopControl) return t.pass('no /dev/loop-control here');
  await run(t, 'launch', 'bb', 'u8sub');
  await run(t, 'config', 'device', 'add', 'u8sub', 'blocks', 'unix-hotplug', 'subsystem=block');
  t.is(ueventHelpers().length, 1, 'one reader of the kernel announcements');
  const n = freeLoop();
  t.is(await nodeInside('u8sub', `/dev/loop${n}`), undefined);
  loopControl('add', n);
  let seen: string | undefined;
  await waitFor(async () => (seen = await nodeInside('u8sub', `/dev/loop${n}`)) !== undefined, 10_000, `loop${n} inside`).catch(() => undefined);
  t.is(seen, `block special file 7:${n.toString(16)} 660 0:0`);
  // Usable: a file attached on the host reads the same inside.
  const file = path.join(scratch, 'a.img');
  writeFileSync(file, Buffer.concat([Buffer.from('corral hotplug\n'), Buffer.alloc(65536 - 15)]));
  execFileSync('losetup', [`/dev/loop${n}`, file]);
  t.is((await inside('u8sub', 'head', '-c', '15', `/dev/loop${n}`)).stdout, 'corral hotplug\n');
  execFileSync('losetup', ['-d', `/dev/loop${n}`]);
  loopControl('remove', n);
  await waitFor(async () => (await nodeInside('u8sub', `/dev/loop${n}`)) === undefined, 10_000, `loop${n} gone inside`).catch(() => undefined);
  t.is(await nodeInside('u8sub', `/dev/loop${n}`), undefined);
  // The container's other nodes of the subsystem stayed through the re-plug.
  t.not(await nodeInside('u8sub', '/dev/loop0'), undefined);
  await run(t, 'config', 'device', 'remove', 'u8sub', 'blocks');
  t.is(await nodeInside('u8sub', '/dev/loop0'), undefined);
  await waitFor(() => ueventHelpers().length === 0, 5_000, 'the uevent reader to end with its last follower').catch(() => undefined);
  t.is(ueventHelpers().length, 0, 'no reader once nothing follows the host');
  await run(t, 'delete', '--force', 'u8sub');
});

test.serial('unix-hotplug ownership.inherit (a later reference\'s key, outside the 5.0 catalog): the host node\'s owner is the owner inside; set uid/gid win', async (t) => {
  if (!hasLoopControl) return t.pass('no /dev/loop-control here');
  const n = freeLoop();
  loopControl('add', n);
  await waitFor(() => existsSync(`/dev/loop${n}`), 5_000, `/dev/loop${n} on the host`);
  chownSync(`/dev/loop${n}`, 1000, 1001);
  await run(t, 'launch', 'bb', 'u8own');
  const vm = await d.request('GET', '/1.0/instances/u8own');
  t.is(vm.status, 200);
  await run(t, 'config', 'device', 'add', 'u8own', 'inh', 'unix-hotplug', 'subsystem=block', 'ownership.inherit=true');
  t.regex(await nodeInside('u8own', `/dev/loop${n}`) ?? '', / 1000:1001$/);
  await run(t, 'config', 'device', 'remove', 'u8own', 'inh');
  await run(t, 'config', 'device', 'add', 'u8own', 'inh', 'unix-hotplug', 'subsystem=block', 'ownership.inherit=true', 'gid=5');
  t.regex(await nodeInside('u8own', `/dev/loop${n}`) ?? '', / 1000:5$/);
  await run(t, 'config', 'device', 'remove', 'u8own', 'inh');
  await run(t, 'config', 'device', 'add', 'u8own', 'plain', 'unix-hotplug', 'subsystem=block');
  t.regex(await nodeInside('u8own', `/dev/loop${n}`) ?? '', / 0:0$/);
  await run(t, 'delete', '--force', 'u8own');
  loopControl('remove', n);
});

test.serial('unix_device_hotplug: an optional unix-block whose source appears later is given then, taken back when it goes, also after a daemon restart', async (t) => {
  if (!hasLoopControl) return t.pass('no /dev/loop-control here');
  const n = freeLoop();
  await run(t, 'init', 'bb', 'u8opt');
  await run(t, 'config', 'device', 'add', 'u8opt', 'late', 'unix-block', `source=/dev/loop${n}`, 'path=/dev/late', 'required=false');
  await run(t, 'start', 'u8opt');
  t.is(await nodeInside('u8opt', '/dev/late'), undefined, 'absent at start: started without it');
  loopControl('add', n);
  await waitFor(async () => (await nodeInside('u8opt', '/dev/late')) !== undefined, 10_000, '/dev/late inside').catch(() => undefined);
  t.is(await nodeInside('u8opt', '/dev/late'), `block special file 7:${n.toString(16)} 660 0:0`);
  loopControl('remove', n);
  await waitFor(async () => (await nodeInside('u8opt', '/dev/late')) === undefined, 10_000, '/dev/late gone').catch(() => undefined);
  t.is(await nodeInside('u8opt', '/dev/late'), undefined);

  // The daemon goes away (kill -9) and comes back: the running container is adopted and followed again.
  d.child.kill('SIGKILL');
  await new Promise((resolve) => d.child.once('exit', resolve));
  loopControl('add', n);
  d = await startDaemon({ dir: setting.dir, plugins: 'full' });
  await waitFor(async () => (await nodeInside('u8opt', '/dev/late')) !== undefined, 15_000, '/dev/late after the restart').catch(() => undefined);
  t.not(await nodeInside('u8opt', '/dev/late'), undefined, 'appeared while no daemon watched: given at adoption');
  loopControl('remove', n);
  await waitFor(async () => (await nodeInside('u8opt', '/dev/late')) === undefined, 10_000, '/dev/late gone after the restart').catch(() => undefined);
  t.is(await nodeInside('u8opt', '/dev/late'), undefined);
  await run(t, 'stop', '--force', 'u8opt');
  await waitFor(() => ueventHelpers().length === 0, 5_000, 'the uevent reader to end').catch(() => undefined);
  t.is(ueventHelpers().length, 0, 'the reader ends when the last following container stops');
  t.false(existsSync(path.join(setting.dir, 'devices', 'unix', 'u8opt')) && readdirSync(path.join(setting.dir, 'devices', 'unix', 'u8opt')).length > 0, 'no host node left');
  await run(t, 'delete', 'u8opt');
});
