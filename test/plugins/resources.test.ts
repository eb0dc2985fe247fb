/**
 * The resources plugin: its collectors against this machine's real /proc and /sys, against small
 * fixture trees for hardware this machine lacks (GPUs, InfiniBand, SATA and USB disks, cpufreq,
 * SMBIOS), and the route through the kernel.
 *
 * Every api_extensions name the plugin claims in plugin-registry.json must be listed in
 * CHECKED below, by the test that checks the field it adds; a test compares both lists.
 */
import test from 'ava';
import { mkdtempSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { collectCpu } from '../../plugins/resources/cpu.js';
import { collectGpu } from '../../plugins/resources/gpu.js';
import { collectMemory } from '../../plugins/resources/memory.js';
import { collectNetwork } from '../../plugins/resources/network.js';
import { collectPci, parseVpd } from '../../plugins/resources/pci.js';
import { collectStorage } from '../../plugins/resources/storage.js';
import { collectSystem } from '../../plugins/resources/system.js';
import { collectUsb } from '../../plugins/resources/usb.js';
import { collectResources } from '../../plugins/resources/collect.js';
import { HostReader, parseList, parseSize } from '../../plugins/resources/sysfs.js';
import { startTestKernel } from '../../sdk/testing/index.js';

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** Claimed extension name -> title of the test that checks the field it adds. */
const CHECKED: Record<string, string> = {
  resources: 'host cpu: total, architecture and names agree with os.cpus()',
  resources_cpu_socket: 'host cpu: total, architecture and names agree with os.cpus()',
  resources_v2: 'host cpu: cores, threads and caches (resources_v2, resources_cpu_core_die, resources_cpu_threads_numa, resources_cpu_isolated)',
  resources_cpu_core_die: 'host cpu: cores, threads and caches (resources_v2, resources_cpu_core_die, resources_cpu_threads_numa, resources_cpu_isolated)',
  resources_cpu_threads_numa: 'host cpu: cores, threads and caches (resources_v2, resources_cpu_core_die, resources_cpu_threads_numa, resources_cpu_isolated)',
  resources_cpu_isolated: 'fixture cpu: dies, SMT threads, NUMA, isolation and cpufreq',
  resources_numa: 'host memory: total and used agree with os, NUMA nodes add up (resources_numa)',
  resources_disk_sata: 'fixture storage: a SATA disk with udev data and a USB disk (resources_disk_sata, resources_disk_id, resources_disk_address)',
  resources_disk_id: 'fixture storage: a SATA disk with udev data and a USB disk (resources_disk_sata, resources_disk_id, resources_disk_address)',
  resources_disk_address: 'host storage: the root device is a listed disk or partition (resources_disk_address)',
  resources_usb_pci: 'host pci and usb: every PCI function listed once (resources_usb_pci, resources_pci_iommu, resources_pci_vpd)',
  resources_pci_iommu: 'host pci and usb: every PCI function listed once (resources_usb_pci, resources_pci_iommu, resources_pci_vpd)',
  resources_pci_vpd: 'VPD decoding: product name and keywords, checksum left out (resources_pci_vpd)',
  resources_gpu: 'fixture gpu: PCI card with DRM nodes, SR-IOV and mdev types; USB display adapter (resources_gpu, resources_gpu_mdev, resources_gpu_usb)',
  resources_gpu_mdev: 'fixture gpu: PCI card with DRM nodes, SR-IOV and mdev types; USB display adapter (resources_gpu, resources_gpu_mdev, resources_gpu_usb)',
  resources_gpu_usb: 'fixture gpu: PCI card with DRM nodes, SR-IOV and mdev types; USB display adapter (resources_gpu, resources_gpu_mdev, resources_gpu_usb)',
  resources_infiniband: 'fixture network: InfiniBand card and USB adapter (resources_infiniband, resources_network_usb)',
  resources_network_usb: 'fixture network: InfiniBand card and USB adapter (resources_infiniband, resources_network_usb)',
  resources_system: 'fixture system: SMBIOS identity and chassis type names (resources_system)',
};

const claimed = (): string[] => {
  const registry = JSON.parse(readFileSync(path.join(projectRoot, 'plugin-registry.json'), 'utf8'));
  return registry.plugins.find((p: { id: string }) => p.id === 'resources').provides.extensions;
};

// ---------------------------------------------------------------------------------------------
// Fixture trees: a fake root holding only the files a test needs.

type Tree = Record<string, string | Buffer | { link: string } | null>;

/** Builds a fixture root; `{ link: '/sys/...' }` makes a symlink to that host path inside the root, null a directory. */
function fixture(tree: Tree): string {
  const root = mkdtempSync(path.join(os.tmpdir(), 'corral-resources-'));
  for (const [file, content] of Object.entries(tree)) {
    const local = path.join(root, file);
    if (content === null) {
      mkdirSync(local, { recursive: true });
      continue;
    }
    mkdirSync(path.dirname(local), { recursive: true });
    if (typeof content === 'object' && !Buffer.isBuffer(content)) symlinkSync(path.join(root, content.link), local);
    else writeFileSync(local, content);
  }
  return root;
}

/** Writes `attributes` (name -> value) in a sysfs directory. */
const attrs = (dir: string, attributes: Record<string, string>): Tree =>
  Object.fromEntries(Object.entries(attributes).map(([k, v]) => [`${dir}/${k}`, `${v}\n`]));

const withFixture = async <T>(tree: Tree, fn: (host: HostReader) => Promise<T>): Promise<T> => {
  const root = fixture(tree);
  try {
    return await fn(new HostReader(root));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
};

// ---------------------------------------------------------------------------------------------
// Helpers.

test('list, size and hex helpers', (t) => {
  t.deepEqual(parseList('0-3,8,10-11'), [0, 1, 2, 3, 8, 10, 11]);
  t.deepEqual(parseList(''), []);
  t.deepEqual(parseList(undefined), []);
  t.is(parseSize('32K'), 32768);
  t.is(parseSize('32768K'), 33554432);
  t.is(parseSize('2M'), 2097152);
  t.is(parseSize('junk'), undefined);
});

test('every claimed extension name is checked by a test here, and none is claimed unchecked', (t) => {
  const names = claimed();
  t.true(names.includes('resources'));
  t.deepEqual([...names].sort(), Object.keys(CHECKED).sort());
  // The firmware version of Ethernet cards needs ethtool (an ioctl or netlink), out of reach here.
  t.false(names.includes('resources_network_firmware'));
});

// ---------------------------------------------------------------------------------------------
// This machine.

test(CHECKED.resources!, async (t) => {
  const cpu = await collectCpu(new HostReader());
  t.is(cpu.total, os.cpus().length);
  t.is(cpu.architecture, os.machine());
  t.true(cpu.sockets.length >= 1);
  const model = os.cpus()[0]?.model;
  // resources_cpu_socket: numbered sockets with the processor's name and vendor.
  for (const socket of cpu.sockets) {
    t.is(typeof socket.socket, 'number');
    if (model && socket.name !== undefined) t.is(socket.name, model.trim());
    if (socket.vendor !== undefined) t.is(typeof socket.vendor, 'string');
  }
  t.deepEqual(new Set(cpu.sockets.map((s) => s.socket)).size, cpu.sockets.length);
});

test(CHECKED.resources_v2!, async (t) => {
  const cpu = await collectCpu(new HostReader());
  const online = new Set(parseList(readFileSync('/sys/devices/system/cpu/online', 'utf8')));
  const nodes = readdirSync('/sys/devices/system/node').filter((n) => /^node\d+$/.test(n)).map((n) => Number(n.slice(4)));
  const ids: number[] = [];
  for (const socket of cpu.sockets) {
    t.true(socket.cores.length > 0);
    for (const cache of socket.cache ?? []) {
      t.true(cache.level >= 1 && cache.level <= 4);
      t.true(cache.size > 0);
      t.true(['Data', 'Instruction', 'Unified'].includes(cache.type));
    }
    for (const core of socket.cores) {
      t.is(typeof core.core, 'number');
      t.is(typeof core.die, 'number'); // resources_cpu_core_die
      core.threads.forEach((thread, i) => {
        ids.push(thread.id);
        t.is(thread.thread, i);
        t.is(thread.online, online.has(thread.id));
        t.is(typeof thread.isolated, 'boolean');
        t.true(nodes.length === 0 || nodes.includes(thread.numa_node)); // resources_cpu_threads_numa
      });
    }
  }
  t.deepEqual(ids.sort((a, b) => a - b), [...online].sort((a, b) => a - b));
});

test(CHECKED.resources_numa!, async (t) => {
  const memory = await collectMemory(new HostReader());
  // Total counts memory the kernel keeps for itself too: at least MemTotal, within a few percent.
  t.true(memory.total >= os.totalmem(), `${memory.total} < ${os.totalmem()}`);
  t.true(memory.total <= os.totalmem() * 1.06, `${memory.total} vs ${os.totalmem()}`);
  t.true(memory.used > 0 && memory.used < memory.total);
  // Used is what is neither free nor page cache: at least what os.freemem() (MemAvailable) misses, roughly.
  t.true(memory.total - memory.used <= os.totalmem());
  const meminfo = readFileSync('/proc/meminfo', 'utf8');
  const hugepageKb = Number(/^Hugepagesize:\s+(\d+)/m.exec(meminfo)?.[1] ?? 0);
  t.is(memory.hugepages_size, hugepageKb * 1024);
  t.true(memory.hugepages_used <= memory.hugepages_total);
  const nodes = readdirSync('/sys/devices/system/node').filter((n) => /^node\d+$/.test(n));
  t.is(memory.nodes?.length ?? 0, nodes.length);
  if (memory.nodes?.length) {
    t.deepEqual(memory.nodes.map((n) => `node${n.numa_node}`).sort(), nodes.sort());
    t.is(memory.nodes.reduce((n, node) => n + node.total, 0), memory.total);
    for (const node of memory.nodes) t.true(node.used <= node.total && node.hugepages_used <= node.hugepages_total);
  }
});

/** The disk or partition `/` is mounted from, as `major:minor`. */
function rootDevice(): string {
  const dev = statSync('/').dev;
  const major = Math.floor(dev / 256) & 0xfff;
  const minor = (dev & 0xff) | ((Math.floor(dev / 4096) & ~0xff) >>> 0);
  return `${major}:${minor}`;
}

test(CHECKED.resources_disk_address!, async (t) => {
  const storage = await collectStorage(new HostReader());
  t.is(storage.total, storage.disks.reduce((n, d) => n + 1 + d.partitions.length, 0));
  const root = rootDevice();
  const devices = storage.disks.flatMap((d) => [d.device, ...d.partitions.map((p) => p.device)]);
  if (root.startsWith('0:')) {
    t.log(`/ is on an anonymous device (${root}): overlay or network root, no disk to find`);
  } else {
    // A root on device-mapper or md sits on the disks its `slaves` lists.
    let slaves: string[] = [];
    try {
      slaves = readdirSync(`/sys/dev/block/${root}/slaves`).map((s) => readFileSync(`/sys/class/block/${s}/dev`, 'utf8').trim());
    } catch { /* a partition has no slaves directory */ }
    t.true(devices.includes(root) || slaves.some((s) => devices.includes(s)), `${root} not among ${devices.join(', ')}`);
  }
  for (const disk of storage.disks) {
    t.regex(disk.device, /^\d+:\d+$/);
    t.true(disk.size > 0 || disk.removable);
    t.is(typeof disk.read_only, 'boolean');
    t.is(typeof disk.device_id, 'string');
    t.true(disk.block_size === 0 || disk.block_size >= 512);
    t.is(disk.size, Number(readFileSync(`/sys/class/block/${disk.id}/size`, 'utf8')) * 512);
    // resources_disk_address: where the disk hangs from.
    if (disk.pci_address !== undefined) t.true(readdirSync('/sys/bus/pci/devices').includes(disk.pci_address));
    if (disk.usb_address !== undefined) t.regex(disk.usb_address, /^\d+:\d+$/);
    t.false(disk.pci_address !== undefined && disk.usb_address !== undefined);
  }
  const rootDisk = storage.disks.find((d) => d.device === root || d.partitions.some((p) => p.device === root));
  if (rootDisk?.type === 'virtio' || rootDisk?.type === 'nvme') t.regex(rootDisk.pci_address ?? '', /^[0-9a-f]{4}:/);
});

test(CHECKED.resources_usb_pci!, async (t) => {
  const [pci, usb] = await Promise.all([collectPci(new HostReader()), collectUsb(new HostReader())]);
  const addresses = readdirSync('/sys/bus/pci/devices').sort();
  t.deepEqual(pci.devices.map((d) => d.pci_address).sort(), addresses);
  t.is(pci.total, addresses.length);
  for (const device of pci.devices) {
    t.regex(device.vendor_id, /^[0-9a-f]{4}$/);
    t.regex(device.product_id, /^[0-9a-f]{4}$/);
    t.is(device.vendor_id, readFileSync(`/sys/bus/pci/devices/${device.pci_address}/vendor`, 'utf8').trim().slice(2));
    t.is(typeof device.iommu_group, 'number'); // resources_pci_iommu
    t.is(typeof device.vpd, 'object'); // resources_pci_vpd
    t.true(device.driver === '' ? device.driver_version === '' : device.driver_version !== '');
  }
  t.is(usb.total, usb.devices.length);
  for (const device of usb.devices) {
    t.true(device.bus_address > 0 && device.device_address > 0);
    t.regex(device.vendor_id, /^[0-9a-f]{4}$/);
    t.true(Array.isArray(device.interfaces));
  }
});

test('host network: cards carry the hardware interfaces, with their MAC addresses', async (t) => {
  const network = await collectNetwork(new HostReader());
  t.is(network.total, network.cards.length);
  const hardware = readdirSync('/sys/class/net').filter((n) => {
    try {
      return statSync(`/sys/class/net/${n}/device`).isDirectory();
    } catch {
      return false;
    }
  });
  const ports = network.cards.flatMap((c) => [...(c.ports ?? []), ...(c.sriov?.vfs.flatMap((v) => v.ports ?? []) ?? [])]);
  t.deepEqual(ports.map((p) => p.id).sort(), hardware.sort());
  const macs = new Map(Object.entries(os.networkInterfaces()).map(([name, addrs]) => [name, addrs?.[0]?.mac]));
  for (const port of ports) {
    t.is(port.address, readFileSync(`/sys/class/net/${port.id}/address`, 'utf8').trim());
    if (macs.get(port.id)) t.is(port.address, macs.get(port.id));
    t.true(['ethernet', 'infiniband', 'unknown'].includes(port.protocol));
    t.is(typeof port.link_detected, 'boolean');
  }
  for (const card of network.cards) t.false(card.pci_address !== undefined && card.usb_address !== undefined);
});

test('host gpu and system sections are well formed', async (t) => {
  const [gpu, system] = await Promise.all([collectGpu(new HostReader()), collectSystem(new HostReader())]);
  t.is(gpu.total, gpu.cards.length);
  t.true(['physical', 'virtual-machine', 'container', 'unknown'].includes(system.type));
  for (const key of ['uuid', 'vendor', 'product', 'family', 'version', 'sku', 'serial'] as const) t.is(typeof system[key], 'string');
  for (const key of ['firmware', 'chassis', 'motherboard'] as const) t.true(system[key] === null || typeof system[key] === 'object');
});

test('the whole document has every section and is plain JSON', async (t) => {
  const doc = await collectResources(new HostReader());
  t.deepEqual(Object.keys(doc), ['cpu', 'memory', 'gpu', 'network', 'storage', 'usb', 'pci', 'system']);
  const started = performance.now();
  await collectResources(new HostReader());
  t.log(`one collection: ${(performance.now() - started).toFixed(1)} ms`);
  t.deepEqual(JSON.parse(JSON.stringify(doc)), doc);
});

// ---------------------------------------------------------------------------------------------
// Fixture trees for hardware this machine does not have.

test(CHECKED.resources_cpu_isolated!, async (t) => {
  const cpu = '/sys/devices/system/cpu';
  const tree: Tree = {
    ...attrs(cpu, { online: '0-3', isolated: '2-3' }),
    '/proc/cpuinfo': [0, 1, 2, 3].map((i) => `processor\t: ${i}\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Test CPU\n`).join('\n'),
  };
  for (const id of [0, 1, 2, 3]) {
    Object.assign(tree, attrs(`${cpu}/cpu${id}/topology`, { physical_package_id: '0', die_id: String(id >> 1), core_id: '0' }));
    Object.assign(tree, attrs(`${cpu}/cpu${id}/cpufreq`, { scaling_cur_freq: String(2_000_000 + id * 500_000), cpuinfo_min_freq: '800000', cpuinfo_max_freq: '4500000' }));
    tree[`${cpu}/cpu${id}/node${id >> 1}`] = null;
  }
  Object.assign(tree, attrs(`${cpu}/cpu0/cache/index0`, { level: '1', type: 'Data', size: '48K' }));
  Object.assign(tree, attrs(`${cpu}/cpu0/cache/index3`, { level: '3', type: 'Unified', size: '32768K' }));

  const result = await withFixture(tree, collectCpu);
  t.is(result.total, 4);
  t.is(result.sockets.length, 1);
  const socket = result.sockets[0]!;
  t.is(socket.name, 'Intel(R) Xeon(R) Test CPU');
  t.is(socket.vendor, 'GenuineIntel');
  t.deepEqual(socket.cache, [{ level: 1, type: 'Data', size: 49152 }, { level: 3, type: 'Unified', size: 33554432 }]);
  // Two dies, one core each, two SMT threads per core.
  t.deepEqual(socket.cores.map((c) => [c.die, c.core, c.threads.map((th) => th.id)]), [[0, 0, [0, 1]], [1, 0, [2, 3]]]);
  t.deepEqual(socket.cores.flatMap((c) => c.threads.map((th) => th.thread)), [0, 1, 0, 1]);
  t.deepEqual(socket.cores.flatMap((c) => c.threads.map((th) => th.numa_node)), [0, 0, 1, 1]);
  t.deepEqual(socket.cores.flatMap((c) => c.threads.map((th) => th.isolated)), [false, false, true, true]); // resources_cpu_isolated
  t.deepEqual(socket.cores.map((c) => c.frequency), [2500, 3500]);
  t.is(socket.frequency, 3000);
  t.is(socket.frequency_minimum, 800);
  t.is(socket.frequency_turbo, 4500);
});

const PCI_ROOT = '/sys/devices/pci0000:00';

test(CHECKED.resources_gpu!, async (t) => {
  const gpu = `${PCI_ROOT}/0000:00:01.0/0000:01:00.0`;
  const vf = `${PCI_ROOT}/0000:00:01.0/0000:01:00.4`;
  const udl = `${PCI_ROOT}/0000:00:14.0/usb3/3-1`;
  const tree: Tree = {
    ...attrs(gpu, { class: '0x030000', vendor: '0x10de', device: '0x1eb8', numa_node: '1', sriov_totalvfs: '4', sriov_numvfs: '1' }),
    [`${gpu}/driver`]: { link: '/sys/bus/pci/drivers/nvidia' },
    '/sys/bus/pci/drivers/nvidia/module': { link: '/sys/module/nvidia' },
    '/sys/module/nvidia/version': '470.82.01\n',
    ...attrs(`${gpu}/drm/card0`, { dev: '226:0' }),
    ...attrs(`${gpu}/drm/renderD128`, { dev: '226:128' }),
    ...attrs(`${gpu}/mdev_supported_types/nvidia-222`, { name: 'GRID T4-1B', description: 'num_heads=4', available_instances: '15', device_api: 'vfio-pci' }),
    [`${gpu}/mdev_supported_types/nvidia-222/devices/8b1e0f32-3f0a-4f34-9a3c-5e1dbd0e9a55`]: null,
    [`${gpu}/virtfn0`]: { link: vf },
    ...attrs(vf, { class: '0x030200', vendor: '0x10de', device: '0x1eb9', numa_node: '1' }),
    '/sys/bus/pci/devices/0000:01:00.0': { link: gpu },
    '/sys/bus/pci/devices/0000:01:00.4': { link: vf },
    '/sys/class/drm/card0': { link: `${gpu}/drm/card0` },
    [`${gpu}/drm/card0/device`]: { link: gpu },
    '/sys/class/drm/card0-HDMI-A-1': null,
    // A DisplayLink adapter: DRM card on a USB interface.
    ...attrs(udl, { busnum: '3', devnum: '5', idVendor: '17e9', idProduct: '4301' }),
    ...attrs(`${udl}/3-1:1.0/drm/card1`, { dev: '226:1' }),
    [`${udl}/3-1:1.0/driver`]: { link: '/sys/bus/usb/drivers/udl' },
    '/sys/class/drm/card1': { link: `${udl}/3-1:1.0/drm/card1` },
    [`${udl}/3-1:1.0/drm/card1/device`]: { link: `${udl}/3-1:1.0` },
    '/proc/sys/kernel/osrelease': '6.1.0-test\n',
  };
  const result = await withFixture(tree, collectGpu);
  t.is(result.total, 2);
  const [pciCard, usbCard] = result.cards;
  t.like(pciCard, { driver: 'nvidia', driver_version: '470.82.01', numa_node: 1, pci_address: '0000:01:00.0', vendor_id: '10de', product_id: '1eb8' });
  t.deepEqual(pciCard!.drm, { id: 0, card_name: 'card0', card_device: '226:0', render_name: 'renderD128', render_device: '226:128' });
  t.is(pciCard!.usb_address, undefined);
  t.is(pciCard!.sriov?.current_vfs, 1);
  t.is(pciCard!.sriov?.maximum_vfs, 4);
  t.deepEqual(pciCard!.sriov?.vfs.map((v) => v.pci_address), ['0000:01:00.4']);
  // resources_gpu_mdev
  t.deepEqual(pciCard!.mdev, { 'nvidia-222': { api: 'vfio-pci', available: 15, name: 'GRID T4-1B', description: 'num_heads=4', devices: ['8b1e0f32-3f0a-4f34-9a3c-5e1dbd0e9a55'] } });
  // resources_gpu_usb: a USB card has a USB address and no PCI address (its controller's is not its own).
  t.like(usbCard, { driver: 'udl', driver_version: '6.1.0-test', usb_address: '3:5', vendor_id: '17e9', product_id: '4301' });
  t.is(usbCard!.pci_address, undefined);
  t.is(usbCard!.drm?.card_name, 'card1');
});

test(CHECKED.resources_infiniband!, async (t) => {
  const ib = `${PCI_ROOT}/0000:00:02.0/0000:02:00.0`;
  const usbNic = `${PCI_ROOT}/0000:00:14.0/usb2/2-3`;
  const tree: Tree = {
    ...attrs(ib, { vendor: '0x15b3', device: '0x1017', numa_node: '-1' }),
    [`${ib}/driver`]: { link: '/sys/bus/pci/drivers/mlx5_core' },
    '/sys/bus/pci/drivers/mlx5_core/module': { link: '/sys/module/mlx5_core' },
    '/sys/module/mlx5_core/version': '5.0-0\n',
    ...attrs(`${ib}/infiniband/mlx5_0`, { fw_ver: '16.27.2008' }),
    ...attrs(`${ib}/infiniband_mad/umad0`, { port: '1', dev: '231:0' }),
    ...attrs(`${ib}/infiniband_mad/issm0`, { port: '1', dev: '231:64' }),
    ...attrs(`${ib}/infiniband_verbs/uverbs0`, { dev: '231:192' }),
    ...attrs(`${ib}/net/ib0`, { type: '32', address: '00:00:10:49:fe:80:00:00:00:00:00:00:b8:59:9f:03:00:c4:1e:0a', dev_port: '0', carrier: '1', speed: '100000', duplex: 'full' }),
    [`${ib}/net/ib0/device`]: { link: ib },
    '/sys/class/net/ib0': { link: `${ib}/net/ib0` },
    ...attrs(usbNic, { busnum: '2', devnum: '4', idVendor: '0bda', idProduct: '8153' }),
    [`${usbNic}/2-3:1.0/driver`]: { link: '/sys/bus/usb/drivers/r8152' },
    ...attrs(`${usbNic}/2-3:1.0/net/enx00e04c680001`, { type: '1', address: '00:e0:4c:68:00:01', dev_port: '0', carrier: '0', speed: '-1', duplex: 'unknown' }),
    [`${usbNic}/2-3:1.0/net/enx00e04c680001/device`]: { link: `${usbNic}/2-3:1.0` },
    '/sys/class/net/enx00e04c680001': { link: `${usbNic}/2-3:1.0/net/enx00e04c680001` },
    ...attrs('/sys/devices/virtual/net/lo', { type: '772', address: '00:00:00:00:00:00' }),
    '/sys/class/net/lo': { link: '/sys/devices/virtual/net/lo' },
    '/proc/sys/kernel/osrelease': '6.1.0-test\n',
  };
  const result = await withFixture(tree, collectNetwork);
  t.is(result.total, 2);
  const [usbCard, ibCard] = result.cards.sort((a, b) => (a.pci_address ?? '').localeCompare(b.pci_address ?? ''));
  t.like(ibCard, { driver: 'mlx5_core', driver_version: '5.0-0', numa_node: 0, pci_address: '0000:02:00.0', vendor_id: '15b3', product_id: '1017', firmware_version: '16.27.2008' });
  t.like(ibCard!.ports![0], { id: 'ib0', port: 0, protocol: 'infiniband', link_detected: true, link_speed: 100000, link_duplex: 'full' });
  // resources_infiniband
  t.deepEqual(ibCard!.ports![0]!.infiniband, { issm_name: 'issm0', issm_device: '231:64', mad_name: 'umad0', mad_device: '231:0', verb_name: 'uverbs0', verb_device: '231:192' });
  // resources_network_usb
  t.like(usbCard, { driver: 'r8152', driver_version: '6.1.0-test', usb_address: '2:4', vendor_id: '0bda', product_id: '8153' });
  t.is(usbCard!.pci_address, undefined);
  t.like(usbCard!.ports![0], { id: 'enx00e04c680001', address: '00:e0:4c:68:00:01', protocol: 'ethernet', link_detected: false });
  t.is(usbCard!.ports![0]!.link_speed, undefined);
  t.is(usbCard!.ports![0]!.link_duplex, undefined);
});

test(CHECKED.resources_disk_sata!, async (t) => {
  const sata = `${PCI_ROOT}/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0`;
  const usb = `${PCI_ROOT}/0000:00:14.0/usb1/1-2/1-2:1.0/host1/target1:0:0/1:0:0:0`;
  const tree: Tree = {
    ...attrs(sata, { model: 'Samsung SSD 860', rev: 'RVT04B6Q', type: '0' }),
    [`${sata}/subsystem`]: { link: '/sys/bus/scsi' },
    ...attrs(`${sata}/block/sda`, { dev: '8:0', ro: '0', size: '1000215216', removable: '0', 'queue/rotational': '0', 'queue/physical_block_size': '4096', 'queue/logical_block_size': '512' }),
    [`${sata}/block/sda/device`]: { link: sata },
    ...attrs(`${sata}/block/sda/sda1`, { partition: '1', dev: '8:1', ro: '0', size: '2048' }),
    ...attrs(`${sata}/block/sda/sda2`, { partition: '2', dev: '8:2', ro: '1', size: '4096' }),
    '/sys/class/block/sda': { link: `${sata}/block/sda` },
    '/sys/class/block/sda1': { link: `${sata}/block/sda/sda1` },
    '/sys/class/block/sda2': { link: `${sata}/block/sda/sda2` },
    '/run/udev/data/b8:0': 'S:disk/by-id/ata-Samsung_SSD_860_S3Z9NB0K\nE:ID_ATA_SATA=1\nE:ID_SERIAL_SHORT=S3Z9NB0K\nE:ID_REVISION=RVT04B6Q\nE:ID_WWN=0x5002538e40000000\n',
    '/dev/disk/by-id/wwn-0x5002538e40000000': { link: '/dev/sda' },
    '/dev/disk/by-id/ata-Samsung_SSD_860_S3Z9NB0K': { link: '/dev/sda' },
    '/dev/disk/by-id/ata-Samsung_SSD_860_S3Z9NB0K-part1': { link: '/dev/sda1' },
    '/dev/disk/by-path/pci-0000:00:17.0-ata-1': { link: '/dev/sda' },
    '/dev/sda': '',
    '/dev/sda1': '',
    // A spinning disk behind a USB bridge, without udev data.
    ...attrs(usb, { model: 'External HDD', type: '0' }),
    [`${usb}/subsystem`]: { link: '/sys/bus/scsi' },
    ...attrs(`${PCI_ROOT}/0000:00:14.0/usb1/1-2`, { busnum: '1', devnum: '3', idVendor: '1058', idProduct: '25a2' }),
    ...attrs(`${usb}/block/sdb`, { dev: '8:16', ro: '0', size: '100', removable: '1', 'queue/rotational': '1', 'queue/physical_block_size': '512' }),
    [`${usb}/block/sdb/device`]: { link: usb },
    '/sys/class/block/sdb': { link: `${usb}/block/sdb` },
    // A loop device has no `device`: not a disk.
    ...attrs('/sys/devices/virtual/block/loop0', { dev: '7:0', size: '0', ro: '0', removable: '0' }),
    '/sys/class/block/loop0': { link: '/sys/devices/virtual/block/loop0' },
  };
  const result = await withFixture(tree, collectStorage);
  t.deepEqual(result.disks.map((d) => d.id), ['sda', 'sdb']);
  t.is(result.total, 4);
  const [sda, sdb] = result.disks;
  t.like(sda, {
    id: 'sda', device: '8:0', model: 'Samsung SSD 860', type: 'sata', read_only: false, size: 1000215216 * 512, removable: false,
    wwn: '0x5002538e40000000', numa_node: 0,
    // resources_disk_sata
    device_path: 'pci-0000:00:17.0-ata-1', block_size: 4096, firmware_version: 'RVT04B6Q', rpm: 0, serial: 'S3Z9NB0K',
    // resources_disk_id
    device_id: 'ata-Samsung_SSD_860_S3Z9NB0K',
    // resources_disk_address
    pci_address: '0000:00:17.0',
  });
  t.deepEqual(sda!.partitions, [
    { id: 'sda1', device: '8:1', read_only: false, size: 2048 * 512, partition: 1 },
    { id: 'sda2', device: '8:2', read_only: true, size: 4096 * 512, partition: 2 },
  ]);
  t.like(sdb, { type: 'usb', removable: true, rpm: 1, block_size: 512, device_id: '', usb_address: '1:3' });
  t.is(sdb!.pci_address, undefined);
  t.is(sdb!.serial, undefined);
  t.is(sdb!.device_path, undefined);
});

test(CHECKED.resources_pci_vpd!, (t) => {
  const field = (k: string, v: string) => Buffer.concat([Buffer.from(k, 'latin1'), Buffer.from([v.length]), Buffer.from(v, 'latin1')]);
  const large = (tag: number, body: Buffer) => Buffer.concat([Buffer.from([tag, body.length & 0xff, body.length >> 8]), body]);
  const name = Buffer.from('Example 10GbE Adapter  ', 'latin1');
  const ro = Buffer.concat([field('PN', 'X520-DA2'), field('EC', 'G12345'), field('SN', 'ABC123\0\0'), field('RV', '\x42')]);
  const rw = Buffer.concat([field('V0', 'custom'), field('RW', '\0\0\0\0')]);
  const vpd = Buffer.concat([large(0x82, name), large(0x90, ro), large(0x91, rw), Buffer.from([0x78]), Buffer.alloc(16, 0xff)]);
  t.deepEqual(parseVpd(vpd), { product_name: 'Example 10GbE Adapter', entries: { PN: 'X520-DA2', EC: 'G12345', SN: 'ABC123', V0: 'custom' } });
  t.deepEqual(parseVpd(undefined), {});
  t.deepEqual(parseVpd(Buffer.alloc(64, 0xff)), {});
  t.deepEqual(parseVpd(Buffer.from([0x82, 0x40, 0x00, 0x41])), {}); // truncated
});

test('fixture pci: driverless function, IOMMU group and VPD', async (t) => {
  const dev = `${PCI_ROOT}/0000:00:03.0`;
  const bridge = `${PCI_ROOT}/0000:00:00.0`;
  const tree: Tree = {
    ...attrs(dev, { vendor: '0x8086', device: '0x10fb', numa_node: '0', class: '0x020000' }),
    [`${dev}/vpd`]: Buffer.concat([Buffer.from([0x82, 4, 0]), Buffer.from('NIC1'), Buffer.from([0x78])]),
    [`${dev}/iommu_group`]: { link: '/sys/kernel/iommu_groups/17' },
    '/sys/kernel/iommu_groups/17': null,
    [`${dev}/driver`]: { link: '/sys/bus/pci/drivers/ixgbe' },
    ...attrs(bridge, { vendor: '0x8086', device: '0x0d57', numa_node: '-1', class: '0x060000' }),
    '/sys/bus/pci/devices/0000:00:00.0': { link: bridge },
    '/sys/bus/pci/devices/0000:00:03.0': { link: dev },
    '/proc/sys/kernel/osrelease': '6.1.0-test\n',
    '/usr/share/misc/pci.ids': '# test\n8086  Intel Corporation\n\t10fb  82599ES 10-Gigabit SFI/SFP+ Network Connection\n\t\t8086 000c  Ethernet Server Adapter X520-2\nC 02  Network controller\n\t00  Ethernet controller\n',
  };
  const result = await withFixture(tree, collectPci);
  t.deepEqual(result.devices, [
    { driver: '', driver_version: '', numa_node: 0, pci_address: '0000:00:00.0', vendor: 'Intel Corporation', vendor_id: '8086', product: '', product_id: '0d57', iommu_group: 0, vpd: {} },
    { driver: 'ixgbe', driver_version: '6.1.0-test', numa_node: 0, pci_address: '0000:00:03.0', vendor: 'Intel Corporation', vendor_id: '8086', product: '82599ES 10-Gigabit SFI/SFP+ Network Connection', product_id: '10fb', iommu_group: 17, vpd: { product_name: 'NIC1' } },
  ]);
});

test('fixture usb: devices with interfaces and names from usb.ids or the device', async (t) => {
  const hub = `${PCI_ROOT}/0000:00:14.0/usb1`;
  const kbd = `${hub}/1-1`;
  const tree: Tree = {
    ...attrs(hub, { busnum: '1', devnum: '1', idVendor: '1d6b', idProduct: '0002', speed: '480', manufacturer: 'Linux 6.1.0 xhci-hcd', product: 'xHCI Host Controller' }),
    ...attrs(`${hub}/1-0:1.0`, { bInterfaceClass: '09', bInterfaceSubClass: '00', bInterfaceNumber: '00' }),
    [`${hub}/1-0:1.0/driver`]: { link: '/sys/bus/usb/drivers/hub' },
    ...attrs(kbd, { busnum: '1', devnum: '2', idVendor: '046d', idProduct: 'c31c', speed: '1.5', manufacturer: 'Logitech', product: 'USB Keyboard' }),
    ...attrs(`${kbd}/1-1:1.1`, { bInterfaceClass: '03', bInterfaceSubClass: '00', bInterfaceNumber: '01' }),
    ...attrs(`${kbd}/1-1:1.0`, { bInterfaceClass: '03', bInterfaceSubClass: '01', bInterfaceNumber: '00' }),
    [`${kbd}/1-1:1.0/driver`]: { link: '/sys/bus/usb/drivers/usbhid' },
    '/sys/bus/usb/devices/usb1': { link: hub },
    '/sys/bus/usb/devices/1-0:1.0': { link: `${hub}/1-0:1.0` },
    '/sys/bus/usb/devices/1-1': { link: kbd },
    '/sys/bus/usb/devices/1-1:1.0': { link: `${kbd}/1-1:1.0` },
    '/sys/bus/usb/devices/1-1:1.1': { link: `${kbd}/1-1:1.1` },
    '/proc/sys/kernel/osrelease': '6.1.0-test\n',
    '/usr/share/misc/usb.ids': '1d6b  Linux Foundation\n\t0002  2.0 root hub\nC 03  Human Interface Device\n\t01  Boot Interface Subclass\n\t\t01  Keyboard\nC 09  Hub\n\t00  Unused\nAT 0001  test\n',
  };
  const result = await withFixture(tree, collectUsb);
  t.is(result.total, 2);
  const [root, kb] = result.devices;
  t.like(root, { bus_address: 1, device_address: 1, vendor: 'Linux Foundation', vendor_id: '1d6b', product: '2.0 root hub', product_id: '0002', speed: 480 });
  t.deepEqual(root!.interfaces, [{ class: 'Hub', class_id: 9, driver: 'hub', driver_version: '6.1.0-test', number: 0, subclass: 'Unused', subclass_id: 0 }]);
  t.like(kb, { bus_address: 1, device_address: 2, vendor: 'Logitech', product: 'USB Keyboard', vendor_id: '046d', product_id: 'c31c', speed: 1.5 });
  t.deepEqual(kb!.interfaces.map((i) => [i.number, i.class, i.subclass, i.driver]), [
    [0, 'Human Interface Device', 'Boot Interface Subclass', 'usbhid'],
    [1, 'Human Interface Device', '', ''],
  ]);
});

test(CHECKED.resources_system!, async (t) => {
  const dmi = '/sys/devices/virtual/dmi/id';
  const tree: Tree = {
    ...attrs(dmi, {
      product_uuid: '7fa1c0cc-2271-11b2-a85c-aab32a05d71a', sys_vendor: 'LENOVO', product_name: '20HRCTO1WW', product_family: 'ThinkPad X1 Carbon 5th',
      product_version: 'ThinkPad X1 Carbon 5th', product_sku: 'LENOVO_MT_20HR', product_serial: 'PY3DD4X9',
      bios_vendor: 'LENOVO', bios_date: '10/14/2020', bios_version: 'N1MET64W (1.49)',
      chassis_vendor: 'LENOVO', chassis_type: '10', chassis_serial: 'PY3DD4X9', chassis_version: 'None',
      board_vendor: 'LENOVO', board_name: '20HRCTO1WW', board_serial: 'L3CF4FX003A', board_version: 'SDK0J40697 WIN',
    }),
    '/sys/class/dmi/id': { link: dmi },
    '/proc/cpuinfo': 'processor\t: 0\nflags\t\t: fpu vme de pse\n',
  };
  const system = await withFixture(tree, collectSystem);
  t.deepEqual(system, {
    uuid: '7fa1c0cc-2271-11b2-a85c-aab32a05d71a', vendor: 'LENOVO', product: '20HRCTO1WW', family: 'ThinkPad X1 Carbon 5th',
    version: 'ThinkPad X1 Carbon 5th', sku: 'LENOVO_MT_20HR', serial: 'PY3DD4X9', type: 'physical',
    firmware: { vendor: 'LENOVO', date: '10/14/2020', version: 'N1MET64W (1.49)' },
    chassis: { vendor: 'LENOVO', type: 'Notebook', serial: 'PY3DD4X9', version: 'None' },
    motherboard: { vendor: 'LENOVO', product: '20HRCTO1WW', serial: 'L3CF4FX003A', version: 'SDK0J40697 WIN' },
  });
  const vm = await withFixture({ ...attrs('/sys/class/dmi/id', { sys_vendor: 'QEMU', product_name: 'Standard PC (Q35 + ICH9, 2009)' }) }, collectSystem);
  t.is(vm.type, 'virtual-machine');
  t.is(vm.firmware, null);
  t.is(vm.chassis, null);
  const container = await withFixture({ '/run/systemd/container': 'lxc\n', '/proc/cpuinfo': 'flags\t: hypervisor\n' }, collectSystem);
  t.is(container.type, 'container');
  t.is(container.uuid, '');
});

// ---------------------------------------------------------------------------------------------
// Through the kernel.

test('GET /1.0/resources through the kernel; GET /1.0 advertises the claimed names', async (t) => {
  const k = await startTestKernel({ plugins: ['resources'] });
  try {
    const r = await k.inject({ method: 'GET', url: '/1.0/resources' });
    t.is(r.statusCode, 200, r.body);
    t.is(r.json.type, 'sync');
    const doc = r.json.metadata;
    t.deepEqual(Object.keys(doc).sort(), ['cpu', 'gpu', 'memory', 'network', 'pci', 'storage', 'system', 'usb']);
    t.is(doc.cpu.total, os.cpus().length);
    t.true(doc.memory.total >= os.totalmem());
    const started = performance.now();
    const again = await k.inject({ method: 'GET', url: '/1.0/resources' });
    t.log(`GET /1.0/resources: ${(performance.now() - started).toFixed(1)} ms`);
    t.is(again.statusCode, 200);
    const server = await k.inject({ method: 'GET', url: '/1.0' });
    const advertised: string[] = server.json.metadata.api_extensions;
    for (const name of claimed()) t.true(advertised.includes(name), name);
    t.false(advertised.includes('resources_network_firmware'));
  } finally {
    await k.stop();
  }
});
