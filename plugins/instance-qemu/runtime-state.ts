/**
 * `lxc info` of a VM, from the host side: the QEMU process's CPU time and resident memory, the
 * NICs' counters read from their taps (what the tap sends, the guest receives), and what the
 * guest agent reports of itself when it is connected (processes, addresses); -1 processes
 * without an agent, as the reference shows.
 */
import { readFileSync } from 'node:fs';
import type { InstanceStatus, NetworkState, RuntimeState } from '../../sdk/index.js';
import type { GuestState } from './agent/contract.js';
import type { Tap } from './taps.js';

const CLOCK_TICKS = 100;

export function stoppedState(): RuntimeState {
  return {
    status: 'Stopped', pid: 0, processes: 0, cpu: { usage: 0 },
    memory: { usage: 0, usage_peak: 0, swap_usage: 0, swap_usage_peak: 0 }, network: null,
  };
}

const read = (file: string) => {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
};

const counter = (iface: string, name: string) => Number(read(`/sys/class/net/${iface}/statistics/${name}`)?.trim() ?? 0) || 0;

function processFigures(pid: number): { cpuNs: number; rss: number; peak: number } {
  const stat = read(`/proc/${pid}/stat`) ?? '';
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 (1-based), 12 and 13 after the command name.
  const ticks = Number(fields[11] ?? 0) + Number(fields[12] ?? 0);
  const status = read(`/proc/${pid}/status`) ?? '';
  const kib = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0) * 1024;
  return { cpuNs: Math.round((ticks * 1e9) / CLOCK_TICKS), rss: kib('VmRSS'), peak: kib('VmHWM') };
}

function tapState(tap: Tap, guest?: NetworkState): NetworkState {
  const mtu = Number(read(`/sys/class/net/${tap.name}/mtu`)?.trim() ?? 1500);
  return {
    addresses: guest?.addresses ?? [],
    counters: {
      bytes_received: counter(tap.name, 'tx_bytes'), bytes_sent: counter(tap.name, 'rx_bytes'),
      packets_received: counter(tap.name, 'tx_packets'), packets_sent: counter(tap.name, 'rx_packets'),
      errors_received: counter(tap.name, 'tx_errors'), errors_sent: counter(tap.name, 'rx_errors'),
      packets_dropped_outbound: counter(tap.name, 'rx_dropped'), packets_dropped_inbound: counter(tap.name, 'tx_dropped'),
    },
    hwaddr: tap.hwaddr ?? guest?.hwaddr ?? '',
    host_name: tap.name,
    mtu,
    state: read(`/sys/class/net/${tap.name}/operstate`)?.trim() === 'down' ? 'down' : 'up',
    type: 'broadcast',
  };
}

export function runningState(pid: number, status: InstanceStatus, taps: Tap[], guest?: GuestState): RuntimeState {
  const figures = processFigures(pid);
  const network: Record<string, NetworkState> = { ...(guest?.network ?? {}) };
  for (const tap of taps) {
    // The guest names its interfaces; match a tap to one by MAC address.
    const inside = Object.entries(guest?.network ?? {}).find(([, n]) => tap.hwaddr && n.hwaddr.toLowerCase() === tap.hwaddr.toLowerCase());
    const name = inside?.[0] ?? tap.device;
    network[name] = tapState(tap, inside?.[1]);
  }
  return {
    status,
    pid,
    processes: guest ? guest.processes : -1,
    cpu: { usage: guest?.cpuNs ?? figures.cpuNs },
    memory: { usage: guest?.memory.usage ?? figures.rss, usage_peak: figures.peak, swap_usage: 0, swap_usage_peak: 0 },
    network,
  };
}
