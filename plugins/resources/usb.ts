/**
 * The `usb` section: every USB device of /sys/bus/usb/devices (root hubs included) with its
 * interfaces, names from usb.ids (or the strings the device reports) and its speed.
 */
import { driverOf } from './device.js';
import { usbIds } from './ids.js';
import { HostReader } from './sysfs.js';
import type { UsbDevice, UsbInterface } from './types.js';

const USB_DEVICES = '/sys/bus/usb/devices';

async function usbInterface(host: HostReader, dir: string): Promise<UsbInterface | undefined> {
  const [klass, subclass, number, drv, ids] = await Promise.all([
    host.hex(`${dir}/bInterfaceClass`),
    host.hex(`${dir}/bInterfaceSubClass`),
    host.hex(`${dir}/bInterfaceNumber`),
    driverOf(host, dir),
    usbIds(host),
  ]);
  if (klass === undefined) return undefined;
  return {
    class: ids.className(klass),
    class_id: klass,
    driver: drv.driver,
    driver_version: drv.version,
    number: number ?? 0,
    subclass: ids.subclassName(klass, subclass ?? 0),
    subclass_id: subclass ?? 0,
  };
}

async function usbDevice(host: HostReader, name: string): Promise<UsbDevice | undefined> {
  const dir = (await host.resolve(`${USB_DEVICES}/${name}`)) ?? `${USB_DEVICES}/${name}`;
  const [bus, dev, vendorId, productId, manufacturer, product, speed, ids] = await Promise.all([
    host.int(`${dir}/busnum`),
    host.int(`${dir}/devnum`),
    host.text(`${dir}/idVendor`),
    host.text(`${dir}/idProduct`),
    host.text(`${dir}/manufacturer`),
    host.text(`${dir}/product`),
    host.text(`${dir}/speed`),
    usbIds(host),
  ]);
  if (bus === undefined || dev === undefined) return undefined;
  // `1-2:1.0` is interface 0 in configuration 1 of device `1-2` (`1-0:1.0` for root hub `usb1`).
  const interfaceNames = (await host.list(dir)).filter((e) => /^\d+-[\d.]+:\d+\.\d+$/.test(e));
  const interfaces = (await Promise.all(interfaceNames.map((i) => usbInterface(host, `${dir}/${i}`))))
    .filter((i): i is UsbInterface => i !== undefined)
    .sort((a, b) => a.number - b.number);
  const v = (vendorId ?? '').toLowerCase();
  const p = (productId ?? '').toLowerCase();
  return {
    bus_address: bus,
    device_address: dev,
    interfaces,
    vendor: ids.vendor(v) || manufacturer || '',
    vendor_id: v,
    product: ids.product(v, p) || product || '',
    product_id: p,
    speed: Number.parseFloat(speed ?? '') || 0,
  };
}

export async function collectUsb(host: HostReader): Promise<{ devices: UsbDevice[]; total: number }> {
  const names = await host.list(USB_DEVICES);
  const deviceNames = names.filter((n) => !n.includes(':'));
  const devices = (await Promise.all(deviceNames.map((n) => usbDevice(host, n))))
    .filter((d): d is UsbDevice => d !== undefined)
    .sort((a, b) => a.bus_address - b.bus_address || a.device_address - b.device_address);
  return { devices, total: devices.length };
}
