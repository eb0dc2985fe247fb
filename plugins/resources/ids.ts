/**
 * Vendor, product and class names from the hwdata databases (`pci.ids`, `usb.ids`) when the host
 * has them installed. A parsed database is kept between requests only as long as the file's size
 * and modification time are unchanged, which each request checks.
 */
import { readFile } from 'node:fs/promises';
import type { HostReader } from './sysfs.js';

const PCI_IDS = ['/usr/share/misc/pci.ids', '/usr/share/hwdata/pci.ids', '/usr/share/pci.ids'];
const USB_IDS = ['/usr/share/misc/usb.ids', '/var/lib/usbutils/usb.ids', '/usr/share/hwdata/usb.ids', '/usr/share/usb.ids'];

interface Vendor {
  name: string;
  products: Map<string, string>;
}

/** Names looked up by lower-case 4-digit hex ids (classes by 2-digit hex). */
export class IdsDatabase {
  readonly vendors = new Map<string, Vendor>();
  readonly classes = new Map<string, { name: string; subclasses: Map<string, string> }>();

  vendor(vendorId: string): string {
    return this.vendors.get(vendorId.toLowerCase())?.name ?? '';
  }

  product(vendorId: string, productId: string): string {
    return this.vendors.get(vendorId.toLowerCase())?.products.get(productId.toLowerCase()) ?? '';
  }

  className(classId: number): string {
    return this.classes.get(hex2(classId))?.name ?? '';
  }

  subclassName(classId: number, subclassId: number): string {
    return this.classes.get(hex2(classId))?.subclasses.get(hex2(subclassId)) ?? '';
  }

  static parse(text: string): IdsDatabase {
    const db = new IdsDatabase();
    let vendor: Vendor | undefined;
    let klass: { name: string; subclasses: Map<string, string> } | undefined;
    for (const line of text.split('\n')) {
      if (!line || line.startsWith('#')) continue;
      if (line.startsWith('\t\t')) continue; // subsystems and programming interfaces: not reported
      if (line.startsWith('\t')) {
        const m = /^\t([0-9a-fA-F]+)\s+(.*)$/.exec(line);
        if (!m) continue;
        if (vendor) vendor.products.set(m[1]!.toLowerCase(), m[2]!.trim());
        else if (klass) klass.subclasses.set(m[1]!.toLowerCase(), m[2]!.trim());
        continue;
      }
      vendor = undefined;
      klass = undefined;
      const v = /^([0-9a-fA-F]{4})\s+(.*)$/.exec(line);
      if (v) {
        vendor = { name: v[2]!.trim(), products: new Map() };
        db.vendors.set(v[1]!.toLowerCase(), vendor);
        continue;
      }
      const c = /^C\s+([0-9a-fA-F]{2})\s+(.*)$/.exec(line);
      if (c) {
        klass = { name: c[2]!.trim(), subclasses: new Map() };
        db.classes.set(c[1]!.toLowerCase(), klass);
      }
      // Other sections (usb.ids' AT, HID, L, ...) are skipped until the next vendor or class.
    }
    return db;
  }
}

const hex2 = (n: number) => n.toString(16).padStart(2, '0');

const EMPTY = new IdsDatabase();
const parsed = new Map<string, { size: number; mtimeMs: number; db: Promise<IdsDatabase> }>();

async function load(host: HostReader, candidates: string[]): Promise<IdsDatabase> {
  for (const file of candidates) {
    const info = await host.stat(file);
    if (!info || info.isDirectory) continue;
    const key = host.local(file);
    const known = parsed.get(key);
    if (known && known.size === info.size && known.mtimeMs === info.mtimeMs) return known.db;
    const db = readFile(key, 'utf8').then(IdsDatabase.parse, () => EMPTY);
    parsed.set(key, { size: info.size, mtimeMs: info.mtimeMs, db });
    return db;
  }
  return EMPTY;
}

export const pciIds = (host: HostReader) => load(host, PCI_IDS);
export const usbIds = (host: HostReader) => load(host, USB_IDS);
