/**
 * The host-hardware-devices plugin's sysfs reads against this host's real sysfs, and the option
 * rules that no daemon round trip is needed for (the e2e tests cover them through the clients).
 */
import test from 'ava';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { gpuCards, infinibandInterfacePresent, pciFunctionPresent, usbDevices } from '../../plugins/host-hardware-devices/host-hardware.js';
import { pciSysfsName } from '../../plugins/host-hardware-devices/options.js';
import { GpuDevice, gpuType } from '../../plugins/host-hardware-devices/gpu.js';
import { InfinibandDevice } from '../../plugins/host-hardware-devices/infiniband.js';

const ctx = (instanceType: 'container' | 'virtual-machine' | 'any') => ({ instanceType, name: 'd', profile: instanceType === 'any', project: 'default' });

test('PCI functions: one sysfs lists is present, an address it does not list is not', (t) => {
  const listed = readdirSync('/sys/bus/pci/devices');
  t.true(listed.length > 0, 'this host lists PCI functions');
  t.true(pciFunctionPresent(listed[0]!));
  t.false(listed.includes('0000:7f:1f.7'));
  t.false(pciFunctionPresent('0000:7f:1f.7'));
  t.is(pciSysfsName('01:00.0'), '0000:01:00.0');
  t.is(pciSysfsName('000A:01:1F.7'), '000a:01:1f.7');
});

test('InfiniBand interfaces: only a link of type 32 counts; loopback and path tricks do not', (t) => {
  t.is(readFileSync('/sys/class/net/lo/type', 'utf8').trim(), '772');
  t.false(infinibandInterfacePresent('lo'));
  t.false(infinibandInterfacePresent('../lo'));
  t.false(infinibandInterfacePresent(''));
  for (const name of readdirSync('/sys/class/net')) {
    t.is(infinibandInterfacePresent(name), readFileSync(`/sys/class/net/${name}/type`, 'utf8').trim() === '32', name);
  }
});

test('USB devices and GPUs: what sysfs lists (nothing on this host when the bus or class is missing)', (t) => {
  const usb = usbDevices();
  if (!existsSync('/sys/bus/usb/devices')) t.deepEqual(usb, []);
  for (const d of usb) t.regex(d.vendorid, /^[0-9a-f]{4}$/);
  const cards = gpuCards();
  if (!existsSync('/sys/class/drm')) t.deepEqual(cards, []);
  for (const c of cards) t.regex(c.card, /^card\d+$/);
});

test('gpu: an unknown gputype is physical, as the reference has it; the instance type decides mig, mdev and sriov', (t) => {
  t.is(gpuType({ type: 'gpu', gputype: 'foo' }), 'physical');
  t.is(gpuType({ type: 'gpu' }), 'physical');
  const gpu = new GpuDevice();
  t.throws(() => gpu.validate({ type: 'gpu', gputype: 'mdev', mdev: 'x' }, ctx('container')), { message: /for virtual machines only/ });
  t.notThrows(() => gpu.validate({ type: 'gpu', gputype: 'mdev', mdev: 'x' }, ctx('virtual-machine')));
  t.notThrows(() => gpu.validate({ type: 'gpu', gputype: 'mdev', mdev: 'x' }, ctx('any')));
  t.throws(() => gpu.validate({ type: 'gpu', gputype: 'mig', 'mig.ci': '0', 'mig.gi': '0' }, ctx('virtual-machine')), { message: /for containers only/ });
  t.notThrows(() => gpu.validate({ type: 'gpu', gputype: 'mig', 'mig.ci': '0', 'mig.gi': '0' }, ctx('container')));
  t.throws(() => gpu.validate({ type: 'gpu', gputype: 'foo', mdev: 'x' }, ctx('container')), { message: /option "mdev" is not valid for a gpu device of gputype "physical"/ });
});

test('infiniband: 8- and 20-byte addresses, the MTU bounds, interface names', (t) => {
  const ib = new InfinibandDevice();
  const base = { type: 'infiniband', nictype: 'physical', parent: 'ib0' };
  t.notThrows(() => ib.validate({ ...base, hwaddr: '00:11:22:33:44:55:66:77' }, ctx('container')));
  t.notThrows(() => ib.validate({ ...base, hwaddr: Array(20).fill('a0').join(':') }, ctx('container')));
  t.throws(() => ib.validate({ ...base, hwaddr: Array(19).fill('a0').join(':') }, ctx('container')), { message: /option "hwaddr"/ });
  t.notThrows(() => ib.validate({ ...base, mtu: '16384' }, ctx('container')));
  t.throws(() => ib.validate({ ...base, mtu: '16385' }, ctx('container')), { message: /MTU range/ });
  t.throws(() => ib.validate({ ...base, name: 'abcdefghijklmnop' }, ctx('container')), { message: /longer than 15/ });
});
