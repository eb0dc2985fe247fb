/**
 * The host's device nodes as sysfs lists them (/sys/dev/char and /sys/dev/block), with the vendor
 * and product ids of the hardware behind each: a USB device's idVendor/idProduct, an input
 * device's id/vendor and id/product, a PCI or virtio device's vendor/device — the nearest
 * ancestor that has them. This is what udev would call ID_VENDOR_ID and ID_MODEL_ID, read
 * without udev.
 */
import { readdirSync, readFileSync, readlinkSync, realpathSync } from 'node:fs';
import path from 'node:path';

export interface HostDevice {
  kind: 'c' | 'b';
  major: number;
  minor: number;
  /** Name under /dev. */
  devname: string;
  subsystem: string;
  /** sysfs directory of the device. */
  sysPath: string;
}

export interface DeviceIds {
  vendor?: string;
  product?: string;
}

const SYS_DEVICES = '/sys/devices';

function read(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** 4 lowercase hex digits, from `0x1af4` or `1AF4`. */
function hexId(v: string | undefined): string | undefined {
  const m = v && /^(?:0x)?([0-9a-fA-F]{1,4})$/.exec(v);
  return m ? m[1]!.toLowerCase().padStart(4, '0') : undefined;
}

/** Pairs of files that name a device's vendor and product, by bus. */
const ID_FILES: [string, string][] = [['idVendor', 'idProduct'], ['id/vendor', 'id/product'], ['vendor', 'device']];

/** The ids of the nearest ancestor (or the device itself) that has them. */
export function deviceIds(sysPath: string): DeviceIds {
  for (let dir = sysPath; dir.startsWith(SYS_DEVICES) && dir !== SYS_DEVICES; dir = path.dirname(dir)) {
    for (const [vendorFile, productFile] of ID_FILES) {
      const vendor = hexId(read(path.join(dir, vendorFile)));
      if (vendor) return { vendor, product: hexId(read(path.join(dir, productFile))) };
    }
  }
  return {};
}

/** Every device node the host's kernel knows, optionally of one subsystem only. */
export function hostDevices(subsystem?: string): HostDevice[] {
  const out: HostDevice[] = [];
  for (const [kind, dir] of [['c', '/sys/dev/char'], ['b', '/sys/dev/block']] as const) {
    let entries: string[];
    try {
      entries = readdirSync(dir);
    } catch {
      continue;
    }
    for (const entry of entries) {
      let sysPath: string;
      let sub: string;
      try {
        sysPath = realpathSync(path.join(dir, entry));
        sub = path.basename(readlinkSync(path.join(sysPath, 'subsystem')));
      } catch {
        continue; // gone while we looked
      }
      if (subsystem && sub !== subsystem) continue;
      const devname = /^DEVNAME=(.+)$/m.exec(read(path.join(sysPath, 'uevent')) ?? '')?.[1];
      const [major, minor] = entry.split(':').map(Number);
      if (!devname || major === undefined || minor === undefined) continue;
      out.push({ kind, major, minor, devname, subsystem: sub, sysPath });
    }
  }
  return out;
}
