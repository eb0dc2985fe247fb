/**
 * The `system` section: the machine's SMBIOS identity (/sys/class/dmi/id) and what kind of
 * system this is: `container` when this daemon runs inside one, `virtual-machine` when the
 * firmware or the CPU says a hypervisor is underneath, `physical` otherwise.
 */
import { HostReader } from './sysfs.js';
import type { SystemInfo } from './types.js';

const DMI = '/sys/class/dmi/id';

/** SMBIOS chassis types (DSP0134, 7.4.1) by number. */
const CHASSIS_TYPES: Record<number, string> = {
  1: 'Other', 2: 'Unknown', 3: 'Desktop', 4: 'Low Profile Desktop', 5: 'Pizza Box', 6: 'Mini Tower',
  7: 'Tower', 8: 'Portable', 9: 'Laptop', 10: 'Notebook', 11: 'Hand Held', 12: 'Docking Station',
  13: 'All in One', 14: 'Sub Notebook', 15: 'Space-saving', 16: 'Lunch Box', 17: 'Main Server Chassis',
  18: 'Expansion Chassis', 19: 'SubChassis', 20: 'Bus Expansion Chassis', 21: 'Peripheral Chassis',
  22: 'RAID Chassis', 23: 'Rack Mount Chassis', 24: 'Sealed-case PC', 25: 'Multi-system chassis',
  26: 'Compact PCI', 27: 'Advanced TCA', 28: 'Blade', 29: 'Blade Enclosure', 30: 'Tablet',
  31: 'Convertible', 32: 'Detachable', 33: 'IoT Gateway', 34: 'Embedded PC', 35: 'Mini PC', 36: 'Stick PC',
};

/** Firmware strings are reported as the firmware wrote them (`None`, `To be filled by O.E.M.` included). */
const clean = (value: string | undefined) => value ?? '';

/** Hypervisor vendors as they appear in SMBIOS vendor or product strings. */
const VM_VENDORS = /\b(qemu|kvm|vmware|virtualbox|innotek|xen|bochs|parallels|bhyve|amazon ec2|google compute engine|microsoft corporation virtual|openstack|cloud hypervisor|firecracker)\b/i;

async function systemType(host: HostReader, vendor: string, product: string): Promise<string> {
  const [systemdContainer, dockerenv, containerenv, lxcBoot, environ] = await Promise.all([
    host.text('/run/systemd/container'),
    host.exists('/.dockerenv'),
    host.exists('/run/.containerenv'),
    host.exists('/dev/.lxc-boot-id'),
    host.raw('/proc/1/environ'),
  ]);
  if (systemdContainer || dockerenv || containerenv || lxcBoot || (environ ?? '').split('\0').some((v) => v.startsWith('container='))) return 'container';

  const [hypervisor, cpuinfo] = await Promise.all([host.text('/sys/hypervisor/type'), host.raw('/proc/cpuinfo')]);
  if (hypervisor || VM_VENDORS.test(`${vendor} ${product}`) || /^flags\s*:.*\bhypervisor\b/m.test(cpuinfo ?? '')) return 'virtual-machine';

  // Without SMBIOS and without CPU flags (some architectures) nothing tells.
  if (!vendor && !product && !/^flags\s*:/m.test(cpuinfo ?? '')) return 'unknown';
  return 'physical';
}

export async function collectSystem(host: HostReader): Promise<SystemInfo> {
  const names = ['product_uuid', 'sys_vendor', 'product_name', 'product_family', 'product_version', 'product_sku', 'product_serial',
    'bios_vendor', 'bios_date', 'bios_version', 'chassis_vendor', 'chassis_type', 'chassis_serial', 'chassis_version',
    'board_vendor', 'board_name', 'board_serial', 'board_version'] as const;
  const values = await Promise.all(names.map((n) => host.text(`${DMI}/${n}`)));
  const dmi = Object.fromEntries(names.map((n, i) => [n, values[i]])) as Record<(typeof names)[number], string | undefined>;
  const present = (...keys: (typeof names)[number][]) => keys.some((k) => dmi[k] !== undefined);
  const vendor = clean(dmi.sys_vendor);
  const product = clean(dmi.product_name);
  const chassisType = dmi.chassis_type !== undefined && /^\d+$/.test(dmi.chassis_type) ? CHASSIS_TYPES[Number(dmi.chassis_type)] ?? '' : clean(dmi.chassis_type);

  return {
    uuid: clean(dmi.product_uuid),
    vendor,
    product,
    family: clean(dmi.product_family),
    version: clean(dmi.product_version),
    sku: clean(dmi.product_sku),
    serial: clean(dmi.product_serial),
    type: await systemType(host, vendor, product),
    firmware: present('bios_vendor', 'bios_date', 'bios_version')
      ? { vendor: clean(dmi.bios_vendor), date: clean(dmi.bios_date), version: clean(dmi.bios_version) }
      : null,
    chassis: present('chassis_vendor', 'chassis_type', 'chassis_serial', 'chassis_version')
      ? { vendor: clean(dmi.chassis_vendor), type: chassisType, serial: clean(dmi.chassis_serial), version: clean(dmi.chassis_version) }
      : null,
    motherboard: present('board_vendor', 'board_name', 'board_serial', 'board_version')
      ? { vendor: clean(dmi.board_vendor), product: clean(dmi.board_name), serial: clean(dmi.board_serial), version: clean(dmi.board_version) }
      : null,
  };
}
