/**
 * The `pci` section: every device of /sys/bus/pci/devices with its driver, NUMA node, IOMMU
 * group, names from pci.ids and the Vital Product Data the card carries (`vpd`).
 */
import { driverOf, numaNodeOf } from './device.js';
import { pciIds } from './ids.js';
import { HostReader, hexId } from './sysfs.js';
import type { PciDevice } from './types.js';

const PCI_DEVICES = '/sys/bus/pci/devices';
/** VPD is at most 32 KiB (15-bit addresses). */
const VPD_MAX = 32 * 1024;

/**
 * Decodes PCI Vital Product Data (PCI Local Bus spec 6.4): the identifier string tag (0x82)
 * gives the product name; the read-only (0x90) and read-write (0x91) tags hold keyword fields
 * (two ASCII characters, a length byte, the value). The checksum (`RV`) and the free read-write
 * space (`RW`) are not product data and are left out. Decoding stops at the end tag (0x78), at
 * anything malformed, or at the end of the data.
 */
export function parseVpd(data: Buffer | undefined): PciDevice['vpd'] {
  const vpd: PciDevice['vpd'] = {};
  if (!data) return vpd;
  const buf = data.subarray(0, VPD_MAX);
  const entries: Record<string, string> = {};
  const clean = (b: Buffer) => b.toString('latin1').replace(/\0+$/, '').trim();
  let pos = 0;
  while (pos < buf.length) {
    const tag = buf[pos]!;
    if ((tag & 0x80) === 0) {
      // Small resource: the only one expected is the end tag.
      if (tag >> 3 === 0x0f) break;
      pos += 1 + (tag & 0x07);
      continue;
    }
    if (pos + 3 > buf.length) break;
    const length = buf.readUInt16LE(pos + 1);
    const start = pos + 3;
    const end = start + length;
    if (end > buf.length) break;
    if (tag === 0x82) {
      vpd.product_name = clean(buf.subarray(start, end));
    } else if (tag === 0x90 || tag === 0x91) {
      for (let k = start; k + 3 <= end;) {
        const keyword = buf.toString('latin1', k, k + 2);
        const size = buf[k + 2]!;
        if (!/^[A-Z0-9]{2}$/i.test(keyword) || k + 3 + size > end) break;
        if (keyword !== 'RV' && keyword !== 'RW') entries[keyword] = clean(buf.subarray(k + 3, k + 3 + size));
        k += 3 + size;
      }
    } else if (tag === 0xff) {
      break; // unprogrammed EEPROM
    }
    pos = end;
  }
  if (Object.keys(entries).length) vpd.entries = entries;
  if (!vpd.product_name) delete vpd.product_name;
  return vpd;
}

export async function pciDevice(host: HostReader, address: string): Promise<PciDevice> {
  const dir = `${PCI_DEVICES}/${address}`;
  const real = (await host.resolve(dir)) ?? dir;
  const [{ driver, version }, numaNode, vendor, device, group, vpd, ids] = await Promise.all([
    driverOf(host, real),
    numaNodeOf(host, real),
    host.hex(`${real}/vendor`),
    host.hex(`${real}/device`),
    host.linkName(`${real}/iommu_group`),
    host.binary(`${real}/vpd`),
    pciIds(host),
  ]);
  const vendorId = hexId(vendor);
  const productId = hexId(device);
  return {
    driver,
    driver_version: version,
    numa_node: numaNode,
    pci_address: address,
    vendor: ids.vendor(vendorId),
    vendor_id: vendorId,
    product: ids.product(vendorId, productId),
    product_id: productId,
    iommu_group: group !== undefined && /^\d+$/.test(group) ? Number(group) : 0,
    vpd: parseVpd(vpd),
  };
}

export async function collectPci(host: HostReader): Promise<{ devices: PciDevice[]; total: number }> {
  const addresses = await host.list(PCI_DEVICES);
  const devices = await Promise.all(addresses.map((a) => pciDevice(host, a)));
  return { devices, total: devices.length };
}
