/**
 * The `storage` section: every block device backed by hardware (an entry of /sys/class/block
 * with a `device` link, which leaves out loop, zram, device-mapper and md devices) with its
 * partitions. Identifiers come from sysfs first and from the udev database (/run/udev/data) and
 * its /dev/disk links where udev runs.
 */
import path from 'node:path';
import { numaNodeOf, pciAddressOf, usbAddressOf, usbDeviceOf } from './device.js';
import { HostReader, omitEmpty, parseKeyValues } from './sysfs.js';
import type { StorageDisk, StoragePartition } from './types.js';

const BLOCK = '/sys/class/block';

/** Names of the links of a /dev/disk/by-* directory, by the device name they point to. */
async function diskLinks(host: HostReader, dir: string): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  const names = await host.list(dir);
  const targets = await Promise.all(names.map((n) => host.link(`${dir}/${n}`)));
  names.forEach((name, i) => {
    const target = targets[i];
    if (!target) return;
    const dev = path.basename(target);
    out.set(dev, [...(out.get(dev) ?? []), name]);
  });
  return out;
}

/** The most telling by-id name: a model/serial name rather than a bare `wwn-` or `nvme-eui.` one. */
function preferredId(names: string[] | undefined): string {
  if (!names?.length) return '';
  const ranked = [...names].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  return ranked[0]!;
}
const rank = (name: string) => (name.startsWith('wwn-') ? 2 : /^nvme-(eui|nguid)\./.test(name) ? 1 : 0);

/**
 * The bus a disk sits on: the device's subsystem (`scsi`, `nvme`, `virtio`, `mmc`...), refined
 * for SCSI disks to `sata`, `usb` or `cdrom` from udev when it knows, from the device tree otherwise.
 */
function diskType(subsystem: string, devicePath: string, scsiType: number | undefined, udev: Map<string, string>, onUsb: boolean): string {
  if (udev.get('ID_CDROM') === '1' || scsiType === 5) return 'cdrom';
  if (udev.get('ID_USB_DRIVER') === 'usb-storage' || (subsystem === 'scsi' && onUsb)) return 'usb';
  if (udev.get('ID_ATA_SATA') === '1' || (subsystem === 'scsi' && /\/ata\d+\//.test(devicePath))) return 'sata';
  return subsystem;
}

async function partitionsOf(host: HostReader, disk: string): Promise<StoragePartition[]> {
  const dir = `${BLOCK}/${disk}`;
  const entries = (await host.list(dir)).filter((e) => e.startsWith(disk));
  const parts = await Promise.all(entries.map(async (name): Promise<StoragePartition | undefined> => {
    const [number, dev, ro, size] = await Promise.all([
      host.int(`${dir}/${name}/partition`), host.text(`${dir}/${name}/dev`), host.int(`${dir}/${name}/ro`), host.int(`${dir}/${name}/size`),
    ]);
    if (number === undefined) return undefined;
    return { id: name, device: dev ?? '', read_only: ro === 1, size: (size ?? 0) * 512, partition: number };
  }));
  return parts.filter((p): p is StoragePartition => p !== undefined).sort((a, b) => a.partition - b.partition);
}

async function disk(host: HostReader, name: string, byId: Map<string, string[]>, byPath: Map<string, string[]>): Promise<StorageDisk | undefined> {
  const entry = `${BLOCK}/${name}`;
  const device = await host.resolve(`${entry}/device`);
  if (!device) return undefined;
  const dev = (await host.text(`${entry}/dev`)) ?? '';
  const [ro, size, removable, rotational, physicalBlock, logicalBlock, entryWwid, deviceWwid, serialAttr, deviceSerial, model, firmwareRev, rev, scsiType, subsystem, udevText, numaNode, onUsb] = await Promise.all([
    host.int(`${entry}/ro`),
    host.int(`${entry}/size`),
    host.int(`${entry}/removable`),
    host.int(`${entry}/queue/rotational`),
    host.int(`${entry}/queue/physical_block_size`),
    host.int(`${entry}/queue/logical_block_size`),
    host.text(`${entry}/wwid`),
    host.text(`${device}/wwid`),
    host.text(`${entry}/serial`),
    host.text(`${device}/serial`),
    host.text(`${device}/model`),
    host.text(`${device}/firmware_rev`),
    host.text(`${device}/rev`),
    host.int(`${device}/type`),
    host.linkName(`${device}/subsystem`),
    host.raw(`/run/udev/data/b${dev}`),
    numaNodeOf(host, device),
    usbDeviceOf(host, device),
  ]);
  const udev = parseKeyValues((udevText ?? '').split('\n').filter((l) => l.startsWith('E:')).map((l) => l.slice(2)).join('\n'));
  const rpmFromUdev = Number(udev.get('ID_ATA_ROTATION_RATE_RPM') ?? '');

  const result: StorageDisk = {
    id: name,
    device: dev,
    model: model || udev.get('ID_MODEL')?.replace(/_/g, ' ') || '',
    type: diskType(subsystem ?? '', device, subsystem === 'scsi' ? scsiType : undefined, udev, onUsb !== undefined),
    read_only: ro === 1,
    size: (size ?? 0) * 512,
    removable: removable === 1,
    wwn: entryWwid || deviceWwid || udev.get('ID_WWN_WITH_EXTENSION') || udev.get('ID_WWN') || '',
    numa_node: numaNode,
    device_path: preferredId(byPath.get(name)),
    block_size: physicalBlock ?? logicalBlock ?? 0,
    firmware_version: firmwareRev || udev.get('ID_REVISION') || rev || '',
    // 0 for solid state; a rotating disk reports its speed when udev read it from the drive, else 1.
    rpm: rotational === 1 ? (rpmFromUdev > 0 ? rpmFromUdev : 1) : 0,
    serial: udev.get('ID_SERIAL_SHORT') || serialAttr || deviceSerial || '',
    device_id: preferredId(byId.get(name)),
    partitions: await partitionsOf(host, name),
    pci_address: pciAddressOf(device),
    usb_address: await usbAddressOf(host, device),
  };
  return omitEmpty(result, ['model', 'type', 'wwn', 'device_path', 'firmware_version', 'serial', 'pci_address', 'usb_address']);
}

export async function collectStorage(host: HostReader): Promise<{ disks: StorageDisk[]; total: number }> {
  const [names, byId, byPath] = await Promise.all([
    host.list(BLOCK), diskLinks(host, '/dev/disk/by-id'), diskLinks(host, '/dev/disk/by-path'),
  ]);
  const disks = (await Promise.all(names.map((n) => disk(host, n, byId, byPath)))).filter((d): d is StorageDisk => d !== undefined);
  // The total counts disks and their partitions.
  return { disks, total: disks.reduce((n, d) => n + 1 + d.partitions.length, 0) };
}
