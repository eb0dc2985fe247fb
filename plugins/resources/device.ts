/**
 * Facts common to any device in the /sys/devices tree: its driver and the driver's version,
 * its NUMA node, and the PCI or USB address of the bus it hangs from.
 */
import path from 'node:path';
import { hexId, type HostReader } from './sysfs.js';

export const PCI_ADDRESS = /^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$/i;

/** The running kernel's release (what a driver built into the kernel reports as its version). */
export async function kernelRelease(host: HostReader): Promise<string> {
  return (await host.text('/proc/sys/kernel/osrelease')) ?? '';
}

/**
 * The kernel driver bound to a device and its version: the module's `version` when the module
 * declares one, the kernel release otherwise (built-in drivers and unversioned modules).
 * Both are empty when no driver is bound.
 */
export async function driverOf(host: HostReader, device: string): Promise<{ driver: string; version: string }> {
  const driver = await host.linkName(`${device}/driver`);
  if (!driver) return { driver: '', version: '' };
  const module = await host.linkName(`${device}/driver/module`);
  const version = module ? await host.text(`/sys/module/${module}/version`) : undefined;
  return { driver, version: version || (await kernelRelease(host)) };
}

/** The directories from a device up to (not including) /sys/devices, nearest first. */
export function ancestors(devicePath: string): string[] {
  const out: string[] = [];
  for (let p = devicePath; p.startsWith('/sys/devices/') && p !== '/sys/devices'; p = path.dirname(p)) out.push(p);
  return out;
}

/** The NUMA node of a device: its own `numa_node`, else the nearest ancestor's; -1 (unknown) is 0. */
export async function numaNodeOf(host: HostReader, devicePath: string): Promise<number> {
  for (const dir of ancestors(devicePath)) {
    const node = await host.int(`${dir}/numa_node`);
    if (node !== undefined) return node > 0 ? node : 0;
  }
  return 0;
}

/** A USB device (`1-2`, `1-2.4`), interface (`1-2:1.0`) or root hub (`usb1`) directory name. */
const USB_NODE = /^(usb\d+|\d+-[\d.]+(:\d+\.\d+)?)$/;

/**
 * The address of the PCI device a device is, or sits under; '' when it is not on PCI, and for
 * devices behind a USB bus (their PCI ancestor is the USB controller, not the device).
 */
export function pciAddressOf(devicePath: string): string {
  for (const dir of ancestors(devicePath)) {
    const name = path.basename(dir);
    if (USB_NODE.test(name)) return '';
    if (PCI_ADDRESS.test(name)) return name;
  }
  return '';
}

/** The USB device a device is, or sits under, as `bus:device`; '' when it is not on USB. */
export async function usbAddressOf(host: HostReader, devicePath: string): Promise<string> {
  const dir = await usbDeviceOf(host, devicePath);
  if (!dir) return '';
  const [bus, dev] = await Promise.all([host.int(`${dir}/busnum`), host.int(`${dir}/devnum`)]);
  return bus === undefined || dev === undefined ? '' : `${bus}:${dev}`;
}

/** The sysfs directory of the USB device a device is or sits under. */
export async function usbDeviceOf(host: HostReader, devicePath: string): Promise<string | undefined> {
  if (!devicePath.includes('/usb')) return undefined;
  for (const dir of ancestors(devicePath)) {
    if (await host.exists(`${dir}/busnum`) && await host.exists(`${dir}/devnum`)) return dir;
  }
  return undefined;
}

/**
 * Vendor and product ids of a device as 4 hex digits: PCI and virtio devices have `vendor` and
 * `device` files, USB devices (and their interfaces, through the parent) `idVendor`/`idProduct`.
 */
export async function deviceIds(host: HostReader, devicePath: string): Promise<{ vendorId: string; productId: string }> {
  const vendor = await host.hex(`${devicePath}/vendor`);
  if (vendor !== undefined) return { vendorId: hexId(vendor), productId: hexId(await host.hex(`${devicePath}/device`)) };
  const usb = await usbDeviceOf(host, devicePath);
  if (usb) return { vendorId: (await host.text(`${usb}/idVendor`)) ?? '', productId: (await host.text(`${usb}/idProduct`)) ?? '' };
  return { vendorId: '', productId: '' };
}
