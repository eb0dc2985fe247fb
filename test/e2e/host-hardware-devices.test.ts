/**
 * usb, gpu, pci and infiniband devices through the real `lxc` client and pylxd against corral (full
 * set). The host has no USB, GPU or InfiniBand hardware (checked in sysfs before each start test):
 * bad options are refused with 400 and our message, good ones are kept on a stopped container, a
 * start with a required absent device fails naming it and leaves the container STOPPED with no
 * process and no volatile record, and it starts once the device is removed. A non-required usb
 * device lets it start. Restricted projects refuse these types unless restricted.devices.<type>=allow.
 */
import test from 'ava';
import { existsSync, readdirSync, rmSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { startWithPool, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { lxc, lxcOk, lxcRefused, python } from '../helpers/clients.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';

const RUN = randomBytes(2).toString('hex');
const C = `u4hw${RUN}`;
let d: Daemon;
let image: BusyboxImage;
const scratch = mkdtempSync(path.join(tmpdir(), 'u4-hw-'));

const hasUsb = () => existsSync('/sys/bus/usb/devices') && readdirSync('/sys/bus/usb/devices').some((n) => !n.includes(':'));
const hasGpu = () => existsSync('/sys/class/drm') && readdirSync('/sys/class/drm').some((n) => /^card\d+$/.test(n));
/** The absent-hardware cases can only be made on a host without that hardware; elsewhere they are skipped (the title says why). */
const withoutUsb = hasUsb() ? test.skip : test.serial;
const withoutGpu = hasGpu() ? test.skip : test.serial;
const ok = (t: any, ...args: string[]) => lxcOk(t, d.socket, ...args);
const state = async () => (await d.request('GET', `/1.0/instances/${C}`)).json?.metadata;

test.before(async () => {
  image = buildBusyboxImage('gzip');
  d = await startWithPool({ plugins: 'full' });
  const imported = await lxc(d.socket, 'image', 'import', image.unified, '--alias', 'bb');
  if (imported.status !== 0) throw new Error(`image import failed: ${imported.stderr}`);
  const made = await lxc(d.socket, 'init', 'bb', C);
  if (made.status !== 0) throw new Error(`init failed: ${made.stderr}`);
});

test.after.always(async () => {
  await lxc(d.socket, 'delete', '--force', C).catch(() => undefined);
  await stopDaemons();
  rmSync(image.dir, { recursive: true, force: true });
  rmSync(scratch, { recursive: true, force: true });
});

/** Bad options as a PATCH of the container's devices: the status and message the API gives. */
const BAD: Array<[Record<string, string>, RegExp]> = [
  [{ type: 'usb', vendorid: 'ABCD' }, /option "vendorid": "ABCD" is not four lower-case hexadecimal digits/],
  [{ type: 'usb', productid: '12345' }, /option "productid"/],
  [{ type: 'usb', uid: '-1' }, /option "uid": "-1" is not a user or group id/],
  [{ type: 'usb', gid: 'x' }, /option "gid"/],
  [{ type: 'usb', mode: '999' }, /option "mode": "999" is not an octal file mode/],
  [{ type: 'usb', required: 'maybe' }, /option "required": "maybe" is not a boolean/],
  [{ type: 'usb', foo: 'bar' }, /option "foo" is not valid for a usb device/],
  [{ type: 'gpu', gputype: 'mdev', mdev: 'x' }, /gputype "mdev" is for virtual machines only/],
  [{ type: 'gpu', gputype: 'sriov' }, /gputype "sriov" is for virtual machines only/],
  [{ type: 'gpu', gputype: 'mig' }, /needs "mig.uuid", or both "mig.gi" and "mig.ci"/],
  [{ type: 'gpu', gputype: 'mig', 'mig.uuid': 'abc' }, /option "mig.uuid": "abc" is not a UUID/],
  [{ type: 'gpu', gputype: 'mig', 'mig.ci': 'x', 'mig.gi': '2' }, /option "mig.ci"/],
  [{ type: 'gpu', gputype: 'mig', 'mig.ci': '1', 'mig.gi': '256' }, /option "mig.gi"/],
  [{ type: 'gpu', gputype: 'mig', 'mig.uuid': 'aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee', 'mig.ci': '1' }, /"mig.ci" cannot be used together with "mig.uuid"/],
  [{ type: 'gpu', gputype: 'mig', 'mig.ci': '1', 'mig.gi': '2', uid: '1' }, /option "uid" is not valid for a gpu device of gputype "mig"/],
  [{ type: 'gpu', id: '0', pci: '0000:01:00.0' }, /"id" cannot be used together with "pci"/],
  [{ type: 'gpu', id: '0', vendorid: '10de' }, /"vendorid" cannot be used together with "id"/],
  [{ type: 'gpu', pci: '0000:1:00.0' }, /option "pci": "0000:1:00.0" is not a PCI address/],
  [{ type: 'gpu', mdev: 'foo' }, /option "mdev" is not valid for a gpu device of gputype "physical"/],
  [{ type: 'pci', address: '0000:01:00.0' }, /pci devices are for virtual machines only/],
  [{ type: 'infiniband' }, /option "nictype" is required/],
  [{ type: 'infiniband', nictype: 'foo', parent: 'ib0' }, /"foo" is not one of physical, sriov/],
  [{ type: 'infiniband', nictype: 'physical' }, /option "parent" is required/],
  [{ type: 'infiniband', nictype: 'sriov', parent: 'ib0', hwaddr: '00:11' }, /option "hwaddr": "00:11" is not an InfiniBand address/],
  [{ type: 'infiniband', nictype: 'physical', parent: 'ib0', mtu: '1279' }, /outside the InfiniBand MTU range/],
  [{ type: 'infiniband', nictype: 'physical', parent: 'ib0', name: 'bad/name' }, /option "name"/],
  [{ type: 'infiniband', nictype: 'physical', parent: 'ib0', foo: '1' }, /option "foo" is not valid for an infiniband device/],
];

test.serial('bad usb, gpu, pci and infiniband options: 400 each with our message, and nothing is kept', async (t) => {
  for (const [device, message] of BAD) {
    const res = await d.request('PATCH', `/1.0/instances/${C}`, { devices: { hw: device } });
    t.is(res.status, 400, JSON.stringify(device));
    t.regex(res.json?.error ?? '', message, JSON.stringify(device));
    t.regex(res.json?.error ?? '', /Invalid device "hw"/);
  }
  t.is((await state()).devices.hw, undefined);
  // The same through lxc: the user reads our message, the device is not added.
  const err = await lxcRefused(t, d.socket, 'config', 'device', 'add', C, 'hw', 'usb', 'vendorid=ZZZZ');
  t.regex(err, /option "vendorid": "ZZZZ" is not four lower-case hexadecimal digits/);
  const err2 = await lxcRefused(t, d.socket, 'config', 'device', 'add', C, 'hw', 'infiniband', 'nictype=physical', 'parent=ib0', 'mtu=99999999');
  t.regex(err2, /outside the InfiniBand MTU range \(1280 to 16384\)/);
  t.notRegex(await ok(t, 'config', 'device', 'show', C), /hw:/);
});

test.serial('good usb, gpu and infiniband options are kept on a stopped container as written', async (t) => {
  const good: Array<[string, string[]]> = [
    ['usb', ['vendorid=abcd', 'productid=1234', 'uid=1000', 'gid=1000', 'mode=0660', 'required=true', 'user.note=x']],
    ['gpu', []],
    ['gpu', ['gputype=physical', 'pci=01:00.0']],
    ['gpu', ['id=0', 'uid=0', 'mode=0666']],
    ['gpu', ['gputype=mig', 'mig.ci=1', 'mig.gi=2', 'pci=0000:01:00.0']],
    ['gpu', ['gputype=mig', 'mig.uuid=MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee']],
    ['infiniband', ['nictype=physical', 'parent=ib0', 'name=ib1', 'mtu=1280', 'hwaddr=00:11:22:33:44:55:66:77']],
    ['infiniband', ['nictype=sriov', 'parent=ib0']],
  ];
  for (const [type, opts] of good) {
    await ok(t, 'config', 'device', 'add', C, 'hw', type, ...opts);
    const kept = (await state()).devices.hw;
    t.deepEqual(kept, { type, ...Object.fromEntries(opts.map((o) => o.split('=') as [string, string])) });
    await ok(t, 'config', 'device', 'remove', C, 'hw');
  }
  t.is((await state()).status, 'Stopped');
});

async function refusedStart(t: any, type: string, opts: string[], message: RegExp) {
  await ok(t, 'config', 'device', 'add', C, 'hw', type, ...opts);
  const err = await lxcRefused(t, d.socket, 'start', C);
  t.regex(err, message);
  const after = await state();
  t.is(after.status, 'Stopped');
  t.deepEqual(Object.keys(after.config).filter((k) => k.startsWith('volatile.hw.')), []);
  t.is((await d.request('GET', `/1.0/instances/${C}/state`)).json?.metadata?.pid ?? 0, 0);
  // Startable again once the device is gone.
  await ok(t, 'config', 'device', 'remove', C, 'hw');
  await ok(t, 'start', C);
  t.is((await state()).status, 'Running');
  await ok(t, 'stop', '--force', C);
}

withoutUsb('usb: a start with a required absent usb device fails naming it; the container stays STOPPED and starts once it is removed', async (t) => {
  await refusedStart(t, 'usb', ['vendorid=abcd', 'productid=1234', 'required=true'], /Device "hw": required USB device not found on the host \(vendorid abcd, productid 1234\)/);
});

withoutGpu('gpu: a start with an absent gpu fails naming it; the container stays STOPPED and starts once it is removed', async (t) => {
  await refusedStart(t, 'gpu', ['vendorid=10de'], /Device "hw": no GPU on the host matches \(vendorid 10de\)/);
});

test.serial('infiniband: a start with an absent parent fails naming it and the container stays STOPPED', async (t) => {
  await refusedStart(t, 'infiniband', ['nictype=physical', 'parent=u4ib0'], /Device "hw": the host has no InfiniBand interface "u4ib0"/);
});

withoutUsb('a usb device that is not required lets the container start without it, and can be hot-plugged', async (t) => {
  await ok(t, 'config', 'device', 'add', C, 'hw', 'usb', 'vendorid=abcd');
  await ok(t, 'start', C);
  t.is((await state()).status, 'Running');
  // Hot-plugged while running: accepted when not required, refused (and not kept) when required.
  await ok(t, 'config', 'device', 'add', C, 'hw2', 'usb', 'productid=beef');
  const err = await lxcRefused(t, d.socket, 'config', 'device', 'add', C, 'hw3', 'usb', 'vendorid=beef', 'required=true');
  t.regex(err, /required USB device not found on the host \(vendorid beef\)/);
  t.is((await state()).devices.hw3, undefined);
  // Unplugged while running, too.
  await ok(t, 'config', 'device', 'remove', C, 'hw2');
  t.is((await state()).status, 'Running');
  await ok(t, 'stop', '--force', C);
  await ok(t, 'config', 'device', 'remove', C, 'hw');
});

withoutUsb('pylxd: a bad gpu is refused with our message; a required usb device stops the start and the container stays Stopped', async (t) => {
  const script = path.join(scratch, 'hw.py');
  writeFileSync(script, `
import json, sys, urllib.parse
import pylxd
client = pylxd.Client(endpoint='http+unix://' + urllib.parse.quote(sys.argv[1], safe=''))
c = client.containers.get(sys.argv[2])
seen = {}
c.devices['pybad'] = {'type': 'gpu', 'pci': 'nonsense'}
try:
    c.save(wait=True)
    seen['bad'] = 'accepted'
except Exception as e:
    seen['bad'] = str(e)
c.sync()
c.devices['pyusb'] = {'type': 'usb', 'vendorid': '1d6b', 'required': 'true'}
c.save(wait=True)
try:
    c.start(wait=True)
    seen['start'] = 'started'
except Exception as e:
    seen['start'] = str(e)
c.sync()
seen['status'] = c.status
del c.devices['pyusb']
c.save(wait=True)
c.start(wait=True)
c.sync()
seen['after'] = c.status
c.stop(force=True, wait=True)
print(json.dumps(seen))
`);
  const run = await python(script, [d.socket, C]);
  t.is(run.status, 0, run.stderr);
  const seen = JSON.parse(run.stdout);
  t.regex(seen.bad, /option "pci": "nonsense" is not a PCI address/);
  t.regex(seen.start, /Device "pyusb": required USB device not found on the host \(vendorid 1d6b\)/);
  t.is(seen.status, 'Stopped');
  t.is(seen.after, 'Running');
});

test.serial('restricted projects refuse usb, gpu, pci and infiniband devices unless restricted.devices.<type>=allow', async (t) => {
  const p = `u4p${RUN}`;
  await ok(t, 'project', 'create', p, '-c', 'features.profiles=true', '-c', 'restricted=true');
  try {
    await ok(t, '--project', p, 'profile', 'create', 'hw');
    const cases: Array<[string, string[], RegExp]> = [
      ['usb', ['vendorid=abcd'], /USB devices are forbidden/],
      ['gpu', [], /GPU devices are forbidden/],
      ['infiniband', ['nictype=physical', 'parent=ib0'], /Infiniband devices are forbidden/],
      ['pci', ['address=0000:01:00.0'], /PCI devices are forbidden/],
    ];
    for (const [type, opts, message] of cases) {
      t.regex(await lxcRefused(t, d.socket, '--project', p, 'profile', 'device', 'add', 'hw', 'x', type, ...opts), message);
      await ok(t, 'project', 'set', p, `restricted.devices.${type}`, 'allow');
      await ok(t, '--project', p, 'profile', 'device', 'add', 'hw', 'x', type, ...opts);
      await ok(t, '--project', p, 'profile', 'device', 'remove', 'hw', 'x');
    }
  } finally {
    await lxc(d.socket, '--project', p, 'profile', 'delete', 'hw');
    await lxc(d.socket, 'project', 'delete', p);
  }
});

test.serial('virtual machines: pci and the VM gputypes are accepted, container-only options refused; a start with a present PCI device is refused as not supported by this build', async (t) => {
  const vm = `u4vm${RUN}`;
  await ok(t, 'init', '--empty', '--vm', vm);
  try {
    const refused: Array<[string[], RegExp]> = [
      [['g', 'gpu', 'uid=1'], /option "uid" applies to containers only/],
      [['g', 'gpu', 'gputype=mdev'], /gputype "mdev" needs "mdev"/],
      [['g', 'gpu', 'gputype=mig', 'mig.ci=1', 'mig.gi=1'], /gputype "mig" is for containers only/],
      [['u', 'usb', 'mode=0600'], /option "mode" applies to containers only/],
      [['p', 'pci'], /option "address" is required/],
      [['p', 'pci', 'address=xyz'], /option "address": "xyz" is not a PCI address/],
    ];
    for (const [args, message] of refused) t.regex(await lxcRefused(t, d.socket, 'config', 'device', 'add', vm, ...args), message);
    await ok(t, 'config', 'device', 'add', vm, 'g', 'gpu', 'gputype=mdev', 'mdev=i915-GVTg_V5_4', 'pci=0000:00:02.0');
    await ok(t, 'config', 'device', 'add', vm, 's', 'gpu', 'gputype=sriov', 'vendorid=8086');
    await ok(t, 'config', 'device', 'remove', vm, 'g');
    await ok(t, 'config', 'device', 'remove', vm, 's');

    // A PCI function this host has (the first one sysfs lists): found, and refused since nothing passes it through.
    const present = readdirSync('/sys/bus/pci/devices')[0];
    if (!present) throw new Error('this host lists no PCI functions under /sys/bus/pci/devices');
    await ok(t, 'config', 'device', 'add', vm, 'p', 'pci', `address=${present}`);
    t.regex(await lxcRefused(t, d.socket, 'start', vm), new RegExp(`Device "p": PCI passthrough is not supported by this build \\(the host has a PCI device at ${present.replace(/\./g, '\\.')}\\)`));
    const after = (await d.request('GET', `/1.0/instances/${vm}/state`)).json?.metadata;
    t.is(after.status, 'Stopped');
    t.is(after.pid ?? 0, 0);
    await ok(t, 'config', 'device', 'set', vm, 'p', 'address=0000:7f:1f.7');
    t.regex(await lxcRefused(t, d.socket, 'start', vm), /Device "p": the host has no PCI device at address 0000:7f:1f\.7/);
    t.is((await d.request('GET', `/1.0/instances/${vm}`)).json?.metadata?.status, 'Stopped');
  } finally {
    await lxc(d.socket, 'delete', '--force', vm);
  }
});

test.serial('a VM-only pci device in a profile: the profile takes it, a container cannot (applying it, or adding it to a profile the container uses, is refused)', async (t) => {
  const profile = `u4prof${RUN}`;
  await ok(t, 'profile', 'create', profile);
  try {
    // A profile is checked for any instance type; a container's expanded devices for a container.
    await ok(t, 'profile', 'device', 'add', profile, 'p', 'pci', 'address=0000:00:00.0');
    t.regex(await lxcRefused(t, d.socket, 'profile', 'add', C, profile), /Invalid device "p": pci devices are for virtual machines only/);
    t.deepEqual((await state()).profiles, ['default']);
    await ok(t, 'profile', 'device', 'remove', profile, 'p');
    await ok(t, 'profile', 'add', C, profile);
    t.regex(await lxcRefused(t, d.socket, 'profile', 'device', 'add', profile, 'g', 'gpu', 'gputype=sriov'), /gputype "sriov" is for virtual machines only/);
    t.deepEqual((await lxcOk(t, d.socket, 'profile', 'device', 'show', profile)).trim(), '{}');
  } finally {
    await lxc(d.socket, 'profile', 'remove', C, profile);
    await lxc(d.socket, 'profile', 'delete', profile);
  }
});
