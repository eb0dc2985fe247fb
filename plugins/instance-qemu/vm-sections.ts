/**
 * The sections of a VM's generated QEMU config: machine, memory and vCPUs, the QMP monitor, the
 * serial console (a socket with a log file), the agent's virtio-serial port, the config drive
 * over 9p, the root disk as virtio-blk, NICs on taps, and the firmware's flash drives.
 * `boot.priority` orders the bootable devices (`bootindex`, highest priority first).
 */
import path from 'node:path';
import { section, type ConfigSection } from './qemu-config.js';
import type { Firmware } from './firmware.js';
import type { Accelerator } from './probe.js';
import type { RunDir } from './run-dir.js';
import { tapNetdev, type Tap } from './taps.js';
import { vgaSections } from './vga.js';

export interface BootDevice {
  /** `root` or `nic-<device>`. */
  id: string;
  priority: number;
}

export interface VmSpec {
  run: RunDir;
  disk: string;
  accelerator: Accelerator;
  cpus: number;
  memoryMiB: number;
  taps: Tap[];
  bootOrder: BootDevice[];
  firmware?: Firmware;
  /** The kernel is loaded directly (qboot), not by firmware: see DisplayCard in vga.ts. */
  directKernel?: boolean;
  uuid?: string;
  /** The console log file (the instance's log directory). */
  consoleLog?: string;
}

/** bootindex per device: highest boot.priority first, ties in the order given. */
export function bootIndexes(order: BootDevice[]): Map<string, number> {
  const sorted = order.map((d, i) => ({ ...d, i })).sort((a, b) => b.priority - a.priority || a.i - b.i);
  // From 1: a direct kernel boot's loader takes index 0.
  return new Map(sorted.map((d, n) => [d.id, n + 1]));
}

/** Spare PCIe root ports for NICs plugged into a running VM (q35's root bus takes no hot-plug). */
export const HOTPLUG_PORTS = 4;
export const hotplugPort = (n: number) => `hotplug${n}`;

export function vmSections(spec: VmSpec): ConfigSection[] {
  const { run } = spec;
  const boot = bootIndexes(spec.bootOrder);
  const socket = (id: string, file: string, extra: Record<string, string> = {}) =>
    section('chardev', id, { backend: 'socket', path: file, server: 'on', wait: 'off', ...extra });
  const out: ConfigSection[] = [
    section('machine', undefined, {
      type: 'q35', accel: spec.accelerator, graphics: 'off',
      ...(spec.firmware?.secureBoot ? { smm: 'on' } : {}),
    }),
    section('memory', undefined, { size: `${spec.memoryMiB}M` }),
    section('smp-opts', undefined, { cpus: String(spec.cpus) }),
    socket('qmp', run.qmpSocket),
    section('mon', 'qmp', { chardev: 'qmp', mode: 'control' }),
    socket('console', run.consoleSocket, { logfile: spec.consoleLog ?? path.join(run.dir, 'console.log'), logappend: 'on' }),
    section('device', 'serial0', { driver: 'isa-serial', chardev: 'console' }),
    section('device', 'virtio-serial', { driver: 'virtio-serial-pci' }),
    socket('agent', run.agentSocket),
    section('device', 'agent', { driver: 'virtserialport', chardev: 'agent', name: 'org.corral.agent' }),
    // The graphical console (`lxc console --type=vga`): a display card and a SPICE server on a socket.
    ...vgaSections(run.spiceSocket, spec.directKernel ? 'bochs-display' : 'virtio-vga'),
    section('fsdev', 'config', { fsdriver: 'local', path: run.configDrive, readonly: 'on', security_model: 'none' }),
    section('device', 'config', { driver: 'virtio-9p-pci', fsdev: 'config', mount_tag: 'config' }),
    section('drive', 'root', { file: spec.disk, format: 'raw', if: 'none', discard: 'unmap', cache: 'writeback' }),
    section('device', 'dev-root', { driver: 'virtio-blk-pci', drive: 'root', bootindex: String(boot.get('root') ?? 0) }),
  ];
  spec.taps.forEach((tap, n) => {
    // Each NIC on a root port of its own: q35's root bus takes no unplug, a root port does.
    const port = `port-nic-${tap.device}`;
    out.push(section('device', port, { driver: 'pcie-root-port', chassis: String(HOTPLUG_PORTS + 1 + n), port: String(0x10 + HOTPLUG_PORTS + n), bus: 'pcie.0' }));
    out.push(section('netdev', `nic-${tap.device}`, tapNetdev(tap)));
    out.push(section('device', `dev-nic-${tap.device}`, {
      driver: 'virtio-net-pci', netdev: `nic-${tap.device}`, bus: port, ...(tap.hwaddr ? { mac: tap.hwaddr } : {}),
      bootindex: String(boot.get(`nic-${tap.device}`) ?? 0),
    }));
  });
  for (let n = 0; n < HOTPLUG_PORTS; n++) {
    out.push(section('device', hotplugPort(n), { driver: 'pcie-root-port', chassis: String(n + 1), port: String(0x10 + n), bus: 'pcie.0' }));
  }
  if (spec.firmware) {
    out.push(section('drive', 'firmware-code', { if: 'pflash', unit: '0', format: 'raw', readonly: 'on', file: spec.firmware.code }));
    out.push(section('drive', 'firmware-vars', { if: 'pflash', unit: '1', format: 'raw', file: spec.firmware.vars }));
    if (spec.firmware.secureBoot) out.push(section('global', undefined, { driver: 'cfi.pflash01', property: 'secure', value: 'on' }));
  }
  return out;
}
