/**
 * Extra disks of a VM: block volumes and host image files, each a virtio-blk disk of its own
 * (the guest sees /dev/vdb, /dev/vdc... after the root disk). At start they are sections of the
 * generated config; on a running VM they plug in through QMP (`blockdev-add`, then `device_add`
 * on a spare PCIe root port of their own) and leave through `device_del`, once the guest let go
 * (DEVICE_DELETED), then `blockdev-del`. What a VM holds is recorded in its run directory, so a
 * daemon restarted since still unplugs it, and so another VM's start can see a volume in use.
 */
import { readdirSync, readFileSync, realpathSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { badRequest, internalError, type DeviceBlock } from '../../sdk/index.js';
import { section, type ConfigSection } from './qemu-config.js';
import { withTimeout, type QmpClient, type QmpEvent } from './qmp.js';
import { RunDir } from './run-dir.js';
import { livePid, type Supervised } from './supervision.js';

export interface AttachedDisk {
  device: string;
  source: string;
  readonly: boolean;
  shared: boolean;
  label: string;
  /** The spare root port a hot-plugged disk sits on. */
  port?: string;
}

/** Spare PCIe root ports for disks plugged into a running VM (beside the NICs' own). */
export const DISK_HOTPLUG_PORTS = 4;
const diskPort = (n: number) => `diskport${n}`;
const QMP_TIMEOUT_MS = 10_000;

/** QEMU ids allow letters, digits, `-`, `.`, `_`: other characters of a device name are hex-escaped. */
export const qemuIdOf = (device: string) => device.replace(/[^A-Za-z0-9_.-]/g, (c) => `_${c.charCodeAt(0).toString(16)}`);
export const driveId = (device: string) => `disk-${qemuIdOf(device)}`;
export const diskDeviceId = (device: string) => `dev-disk-${qemuIdOf(device)}`;

const disksFile = (run: RunDir) => path.join(run.dir, 'disks.json');

export function readDisks(run: RunDir): AttachedDisk[] {
  try {
    return JSON.parse(readFileSync(disksFile(run), 'utf8')) as AttachedDisk[];
  } catch {
    return [];
  }
}

export const writeDisks = (run: RunDir, disks: AttachedDisk[]) => writeFile(disksFile(run), JSON.stringify(disks));

export function attachedDisk(device: string, block: DeviceBlock): AttachedDisk {
  return { device, source: block.source, readonly: Boolean(block.readonly), shared: Boolean(block.shared), label: block.label ?? `"${block.source}"` };
}

const sameFile = (a: string, b: string) => {
  const real = (p: string) => {
    try {
      return realpathSync(p);
    } catch {
      return p;
    }
  };
  return real(a) === real(b);
};

/**
 * A disk that another running VM holds is refused unless the volume says it may be shared
 * (`security.shared`, as it is now): two guests writing one filesystem unknowingly corrupt it.
 */
export function checkNotInUse(root: string, self: RunDir, disks: AttachedDisk[]): void {
  let entries: string[];
  try {
    entries = readdirSync(root);
  } catch {
    return;
  }
  for (const entry of entries) {
    const other = Object.assign(Object.create(RunDir.prototype) as RunDir, { dir: path.join(root, entry), key: entry });
    if (other.dir === self.dir) continue;
    const held = readDisks(other);
    if (!held.length || livePid(other) === undefined) continue;
    for (const disk of disks) {
      if (disk.shared) continue;
      const clash = held.find((h) => sameFile(h.source, disk.source));
      if (clash) {
        throw badRequest(`Device "${disk.device}": ${disk.label} is in use by the running virtual machine "${entry}" (set "security.shared=true" on the volume to let several instances use it)`);
      }
    }
  }
}

/** The config sections of the disks given at start (their ports noted in them), and the spare ports for hot-plugged ones. */
export function diskSections(disks: AttachedDisk[], bootIndex: (id: string) => number | undefined): ConfigSection[] {
  const out: ConfigSection[] = [];
  for (const [n, disk] of disks.entries()) {
    // Each on a root port of its own: a card on q35's root bus could never be unplugged.
    disk.port = `diskboot${n}`;
    out.push(section('device', disk.port, { driver: 'pcie-root-port', chassis: String(21 + n), port: String(0x30 + n), bus: 'pcie.0' }));
    out.push(section('drive', driveId(disk.device), {
      file: disk.source, format: 'raw', if: 'none', cache: 'writeback', discard: 'unmap',
      ...(disk.readonly ? { readonly: 'on' } : {}),
      // QEMU locks an image against a second writer: a shared volume is shared on purpose.
      ...(disk.shared ? { 'file.locking': 'off' } : {}),
    }));
    const index = bootIndex(driveId(disk.device));
    out.push(section('device', diskDeviceId(disk.device), {
      driver: 'virtio-blk-pci', drive: driveId(disk.device), bus: disk.port, serial: qemuIdOf(disk.device).slice(0, 20),
      ...(index !== undefined ? { bootindex: String(index) } : {}),
    }));
  }
  for (let n = 0; n < DISK_HOTPLUG_PORTS; n++) {
    out.push(section('device', diskPort(n), { driver: 'pcie-root-port', chassis: String(11 + n), port: String(0x20 + n), bus: 'pcie.0' }));
  }
  return out;
}

/** A spare port none of `used` takes (disks and shares plugged into a running VM share them). */
export const freeSparePort = (used: (string | undefined)[]) => Array.from({ length: DISK_HOTPLUG_PORTS }, (_, n) => diskPort(n)).find((p) => !used.includes(p));

/** Plugs `disk` into a running VM; what was done is undone when a step fails. */
export async function plugDisk(qmp: QmpClient, usedPorts: (string | undefined)[], disk: AttachedDisk): Promise<void> {
  const port = freeSparePort(usedPorts);
  if (!port) throw badRequest(`No free slot for device "${disk.device}": a running VM takes ${DISK_HOTPLUG_PORTS} hot-plugged disks at most`);
  const node = driveId(disk.device);
  await qmp.execute('blockdev-add', {
    'node-name': node, driver: 'raw', 'read-only': disk.readonly, discard: 'unmap',
    file: { driver: 'file', filename: disk.source, ...(disk.shared ? { locking: 'off' } : {}) },
  }, QMP_TIMEOUT_MS);
  try {
    await qmp.execute('device_add', { driver: 'virtio-blk-pci', id: diskDeviceId(disk.device), drive: node, bus: port, serial: qemuIdOf(disk.device).slice(0, 20) }, QMP_TIMEOUT_MS);
  } catch (err) {
    await qmp.execute('blockdev-del', { 'node-name': node }, QMP_TIMEOUT_MS).catch(() => undefined);
    throw err;
  }
  disk.port = port;
}

/**
 * Takes a card out of a running VM: `device_del`, then the guest's DEVICE_DELETED within `ms`.
 * Resolves false when QEMU has no such card.
 */
export async function unplugCard(vm: Supervised, qmp: QmpClient, id: string, ms: number): Promise<boolean> {
  let listener: ((e: QmpEvent) => void) | undefined;
  const gone = new Promise<void>((resolve) => {
    listener = (e) => {
      if (e.event === 'DEVICE_DELETED' && e.data?.device === id) resolve();
    };
    vm.events.push(listener);
  });
  try {
    const present = await qmp.execute('device_del', { id }, QMP_TIMEOUT_MS).then(() => true, (err: Error) => {
      if (/not found/i.test(err.message)) return false;
      throw err;
    });
    if (present) await withTimeout(gone, ms, `the guest releasing "${id}"`);
    return present;
  } finally {
    vm.events.splice(vm.events.indexOf(listener!), 1);
  }
}

/** Unplugs a disk: the card, then its block node (a disk given at start goes with its card). */
export async function unplugDisk(vm: Supervised, qmp: QmpClient, disk: AttachedDisk, ms: number): Promise<void> {
  try {
    await unplugCard(vm, qmp, diskDeviceId(disk.device), ms);
  } catch (err) {
    throw internalError(`Failed to remove device "${disk.device}": ${(err as Error).message}`);
  }
  await qmp.execute('blockdev-del', { 'node-name': driveId(disk.device) }, QMP_TIMEOUT_MS).catch(() => undefined);
}
