/**
 * What hardware the host has, read from sysfs at device start: USB devices, GPUs (DRM cards and
 * their PCI functions), PCI functions and InfiniBand interfaces. Only reads; nothing is cached,
 * since hardware comes and goes between starts.
 */
import { existsSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';

export interface UsbDevice { name: string; vendorid: string; productid: string }
export interface GpuCard { card: string; id: string; pci: string; vendorid: string; productid: string }

const read = (file: string): string => {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return '';
  }
};

const list = (dir: string): string[] => {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
};

/** USB devices (not interfaces: those names hold a colon). */
export function usbDevices(root = '/sys/bus/usb/devices'): UsbDevice[] {
  return list(root)
    .filter((name) => !name.includes(':'))
    .map((name) => ({ name, vendorid: read(path.join(root, name, 'idVendor')), productid: read(path.join(root, name, 'idProduct')) }))
    .filter((d) => d.vendorid !== '');
}

/** DRM cards (card0, card1...) with the PCI function behind each; hex ids without their 0x. */
export function gpuCards(root = '/sys/class/drm'): GpuCard[] {
  const hex = (v: string) => v.replace(/^0x/, '');
  return list(root)
    .filter((name) => /^card\d+$/.test(name))
    .map((card) => {
      const dev = path.join(root, card, 'device');
      let pci = '';
      try {
        pci = path.basename(realpathSync(dev));
      } catch { /* no device link */ }
      return { card, id: card.slice(4), pci, vendorid: hex(read(path.join(dev, 'vendor'))), productid: hex(read(path.join(dev, 'device'))) };
    });
}

export const pciFunctionPresent = (address: string, root = '/sys/bus/pci/devices'): boolean => existsSync(path.join(root, address));

/** ARPHRD_INFINIBAND, the link type sysfs gives an InfiniBand interface. */
const INFINIBAND_LINK = '32';

export const infinibandInterfacePresent = (name: string, root = '/sys/class/net'): boolean =>
  name !== '' && !name.includes('/') && read(path.join(root, name, 'type')) === INFINIBAND_LINK;
