/**
 * The `network` section: network cards (devices that carry at least one interface of
 * /sys/class/net, virtual interfaces left out), their ports, SR-IOV virtual functions, PCI or
 * USB address, and InfiniBand device nodes.
 *
 * What sysfs does not say is left at its "unknown" value: ethtool-only facts (supported modes and
 * ports, port and transceiver types, auto-negotiation, the driver's firmware version) need the
 * SIOCETHTOOL ioctl or ethtool netlink, which Node cannot issue without a native addon or a
 * child process. InfiniBand cards do publish their firmware version in sysfs (`fw_ver`).
 */
import path from 'node:path';
import { deviceIds, driverOf, numaNodeOf, pciAddressOf, usbAddressOf, usbDeviceOf } from './device.js';
import { pciIds, usbIds } from './ids.js';
import { HostReader, naturalCompare, omitEmpty } from './sysfs.js';
import type { InfinibandPort, NetworkCard, NetworkPort } from './types.js';

const NET = '/sys/class/net';

/** ARPHRD_* link types (include/uapi/linux/if_arp.h) as protocol names. */
const PROTOCOLS: Record<number, string> = { 1: 'ethernet', 32: 'infiniband' };

interface Iface {
  name: string;
  device: string;
  devPort: number;
}

/** Character device `name` (major:minor) of an InfiniBand class entry under the card. */
async function ibNode(host: HostReader, dir: string): Promise<{ name: string; dev: string } | undefined> {
  const dev = await host.text(`${dir}/dev`);
  return dev ? { name: path.basename(dir), dev } : undefined;
}

async function infinibandPort(host: HostReader, iface: Iface): Promise<InfinibandPort | undefined> {
  const madDir = `${iface.device}/infiniband_mad`;
  const verbsDir = `${iface.device}/infiniband_verbs`;
  const [mads, verbs] = await Promise.all([host.list(madDir), host.list(verbsDir)]);
  if (mads.length === 0 && verbs.length === 0) return undefined;
  // IB ports are numbered from 1; an IPoIB interface's dev_port is the port number less one.
  const ibPort = iface.devPort + 1;
  const pick = async (prefix: string) => {
    const candidates = mads.filter((m) => m.startsWith(prefix));
    const ports = await Promise.all(candidates.map((c) => host.int(`${madDir}/${c}/port`)));
    const match = candidates.find((_, i) => ports[i] === ibPort) ?? (candidates.length === 1 ? candidates[0] : undefined);
    return match ? ibNode(host, `${madDir}/${match}`) : undefined;
  };
  const [issm, mad, verb] = await Promise.all([
    pick('issm'), pick('umad'), verbs.length ? ibNode(host, `${verbsDir}/${verbs[0]}`) : undefined,
  ]);
  const port: InfinibandPort = {
    issm_name: issm?.name ?? '', issm_device: issm?.dev ?? '',
    mad_name: mad?.name ?? '', mad_device: mad?.dev ?? '',
    verb_name: verb?.name ?? '', verb_device: verb?.dev ?? '',
  };
  return omitEmpty(port, ['issm_name', 'issm_device', 'mad_name', 'mad_device', 'verb_name', 'verb_device']);
}

async function port(host: HostReader, iface: Iface, index: number): Promise<NetworkPort> {
  const dir = `${NET}/${iface.name}`;
  const [address, type, carrier, speed, duplex] = await Promise.all([
    host.text(`${dir}/address`), host.int(`${dir}/type`), host.int(`${dir}/carrier`), host.int(`${dir}/speed`), host.text(`${dir}/duplex`),
  ]);
  const result: NetworkPort = {
    id: iface.name,
    address: address ?? '',
    port: index,
    protocol: PROTOCOLS[type ?? -1] ?? 'unknown',
    auto_negotiation: false,
    link_detected: carrier === 1,
    link_speed: speed !== undefined && speed > 0 ? speed : 0,
    link_duplex: duplex === 'full' || duplex === 'half' ? duplex : '',
    infiniband: await infinibandPort(host, iface),
  };
  return omitEmpty(result, ['address', 'link_speed', 'link_duplex', 'infiniband']);
}

/** The firmware version an InfiniBand card publishes (`infiniband/<dev>/fw_ver`). */
async function firmwareVersion(host: HostReader, device: string): Promise<string> {
  const ibDevs = await host.list(`${device}/infiniband`);
  for (const ib of ibDevs) {
    const fw = await host.text(`${device}/infiniband/${ib}/fw_ver`);
    if (fw) return fw;
  }
  return '';
}

async function card(host: HostReader, device: string, ifaces: Iface[], vfsOf: (pf: string) => Promise<NetworkCard[]>): Promise<NetworkCard> {
  const [drv, ids, numaNode, usbAddress, onUsb, firmware, pciDb, usbDb] = await Promise.all([
    driverOf(host, device),
    deviceIds(host, device),
    numaNodeOf(host, device),
    usbAddressOf(host, device),
    usbDeviceOf(host, device),
    firmwareVersion(host, device),
    pciIds(host),
    usbIds(host),
  ]);
  const names = onUsb ? usbDb : pciDb;
  const sorted = [...ifaces].sort((a, b) => a.devPort - b.devPort || naturalCompare(a.name, b.name));
  const result: NetworkCard = {
    driver: drv.driver,
    driver_version: drv.version,
    ports: await Promise.all(sorted.map((iface, i) => port(host, iface, i))),
    numa_node: numaNode,
    pci_address: pciAddressOf(device),
    vendor: names.vendor(ids.vendorId),
    vendor_id: ids.vendorId,
    product: names.product(ids.vendorId, ids.productId),
    product_id: ids.productId,
    firmware_version: firmware,
    usb_address: usbAddress,
  };
  // SR-IOV is a property of the PCI function itself.
  if (path.basename(device) === result.pci_address) {
    const [total, current] = await Promise.all([host.int(`${device}/sriov_totalvfs`), host.int(`${device}/sriov_numvfs`)]);
    if (total !== undefined && total > 0) result.sriov = { current_vfs: current ?? 0, maximum_vfs: total, vfs: await vfsOf(device) };
  }
  return omitEmpty(result, ['driver', 'driver_version', 'ports', 'pci_address', 'vendor', 'vendor_id', 'product', 'product_id', 'firmware_version', 'usb_address']);
}

export async function collectNetwork(host: HostReader): Promise<{ cards: NetworkCard[]; total: number }> {
  const names = await host.list(NET);
  const found = await Promise.all(names.map(async (name): Promise<Iface | undefined> => {
    const device = await host.resolve(`${NET}/${name}/device`);
    if (!device) return undefined;
    const devPort = (await host.int(`${NET}/${name}/dev_port`)) ?? (await host.hex(`${NET}/${name}/dev_id`)) ?? 0;
    return { name, device, devPort };
  }));
  const byDevice = new Map<string, Iface[]>();
  for (const iface of found) if (iface) byDevice.set(iface.device, [...(byDevice.get(iface.device) ?? []), iface]);

  // Virtual functions are listed inside their physical function's card, not on their own.
  const nested = new Set<string>();
  const vfsOf = async (pf: string): Promise<NetworkCard[]> => {
    const links = (await host.list(pf)).filter((e) => /^virtfn\d+$/.test(e));
    const vfDevices = (await Promise.all(links.map((l) => host.resolve(`${pf}/${l}`)))).filter((d): d is string => d !== undefined);
    const cards: NetworkCard[] = [];
    for (const vf of vfDevices) {
      // A VF's interfaces hang from the VF's PCI function (or a child of it, as with virtio).
      const vfIfaces = [...byDevice.entries()].filter(([dev]) => dev === vf || dev.startsWith(`${vf}/`));
      if (vfIfaces.length === 0) {
        cards.push(await card(host, vf, [], vfsOf));
        continue;
      }
      for (const [dev, ifaces] of vfIfaces) {
        nested.add(dev);
        cards.push(await card(host, dev, ifaces, vfsOf));
      }
    }
    return cards;
  };

  const all = await Promise.all([...byDevice.entries()].map(async ([device, ifaces]) => ({ device, card: await card(host, device, ifaces, vfsOf) })));
  const cards = all.filter((c) => !nested.has(c.device)).map((c) => c.card);
  return { cards, total: cards.length };
}
