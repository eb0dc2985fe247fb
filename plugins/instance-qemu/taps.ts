/**
 * NICs of VMs: a bridged NIC (the `veth` kind a nic device declares, whose host end goes on a
 * bridge) becomes a tap device on that bridge, made before QEMU starts and given to it by name
 * (`-netdev tap,ifname=...`); the guest sees a virtio-net card with the NIC's MAC address. The
 * taps a VM holds are recorded in its run directory so that a stop after a daemon restart, or
 * the cleanup of a crash, removes them. A macvlan NIC becomes a macvtap on its parent instead
 * (see macvtap.ts).
 */
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { badRequest, type HostTools, type NicRunConfig } from '../../sdk/index.js';
import { checkMode, macvtapName } from './macvtap.js';

export interface Tap {
  device: string;
  /** Host interface name. */
  name: string;
  bridge?: string;
  hwaddr?: string;
  mtu?: number;
  /** The spare PCIe root port a hot-plugged NIC sits on (`hotplugN`). */
  port?: string;
  /** A macvtap on this parent link (a macvlan NIC), in this macvlan mode, instead of a tap. */
  macvtap?: { parent: string; mode: string };
  /** The command QEMU runs to receive the macvtap's open device (see macvtap.ts). */
  helper?: string;
}

const IFNAME = /^[A-Za-z0-9_.:@+-]{1,15}$/;

/** The tap a NIC asks for, or a 400 for what a VM cannot take yet. */
export function tapFor(device: string, nic: NicRunConfig): Tap {
  if (nic.kind === 'macvlan') {
    if (!nic.link || !IFNAME.test(nic.link)) throw badRequest(`Device "${device}": invalid parent interface "${nic.link ?? ''}"`);
    return { device, name: macvtapName(), hwaddr: nic.hwaddr, mtu: nic.mtu, macvtap: { parent: nic.link, mode: checkMode(device, nic.macvlanMode) } };
  }
  if (nic.kind !== 'veth') throw badRequest(`Device "${device}": ${nic.kind} NICs are not supported on virtual machines yet (use a bridged or macvlan NIC)`);
  if (!nic.hostName || !IFNAME.test(nic.hostName)) throw badRequest(`Device "${device}": invalid host interface name "${nic.hostName ?? ''}"`);
  if (nic.link && !IFNAME.test(nic.link)) throw badRequest(`Device "${device}": invalid bridge name "${nic.link}"`);
  return { device, name: nic.hostName, bridge: nic.link, hwaddr: nic.hwaddr, mtu: nic.mtu };
}

export class TapPlumber {
  constructor(private readonly tools: HostTools) {}

  private async ip(args: string[]): Promise<void> {
    const r = await this.tools.run('ip', args, { allowFailure: true, timeoutMs: 10_000 });
    if (r.exitCode !== 0) throw badRequest(`Failed to set up the network interface (ip ${args.join(' ')}): ${r.stderr.trim()}`);
  }

  async create(tap: Tap): Promise<void> {
    if (tap.macvtap) {
      await this.ip(['link', 'add', 'link', tap.macvtap.parent, 'name', tap.name, ...(tap.hwaddr ? ['address', tap.hwaddr] : []), 'type', 'macvtap', 'mode', tap.macvtap.mode]);
    } else {
      await this.ip(['tuntap', 'add', 'dev', tap.name, 'mode', 'tap']);
    }
    try {
      if (tap.mtu) await this.ip(['link', 'set', 'dev', tap.name, 'mtu', String(tap.mtu)]);
      if (tap.bridge) await this.ip(['link', 'set', 'dev', tap.name, 'master', tap.bridge]);
      await this.ip(['link', 'set', 'dev', tap.name, 'up']);
    } catch (err) {
      await this.remove(tap);
      throw err;
    }
  }

  async remove(tap: Tap): Promise<void> {
    await this.tools.run('ip', ['link', 'del', 'dev', tap.name], { allowFailure: true, timeoutMs: 10_000 }).catch(() => undefined);
  }
}

/** QEMU's netdev options for a tap (config section or QMP `netdev_add`, besides its id). */
export function tapNetdev(tap: Tap): Record<string, string> {
  if (tap.helper) return { type: 'tap', helper: tap.helper };
  return { type: 'tap', ifname: tap.name, script: 'no', downscript: 'no' };
}

export function readTaps(file: string): Tap[] {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Tap[];
  } catch {
    return [];
  }
}

export const writeTaps = (file: string, taps: Tap[]) => writeFile(file, JSON.stringify(taps));
