/**
 * `lxc info` of a VM. The guest's own figures come from its agent when it answers: processes, CPU
 * time, memory in use (its /proc/meminfo view, as the reference's agent reports it), its
 * interfaces and addresses. The host side adds the NICs' tap names (`host_name`) and counters
 * (what the tap sends, the guest receives). Without an agent, as the reference: -1 processes, no
 * memory figures (QEMU's resident memory is not the guest's usage), and the QEMU process's CPU time.
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

function processCpuNs(pid: number): number {
  const stat = read(`/proc/${pid}/stat`) ?? '';
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 (1-based), 12 and 13 after the command name.
  const ticks = Number(fields[11] ?? 0) + Number(fields[12] ?? 0);
  return Math.round((ticks * 1e9) / CLOCK_TICKS);
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

/** `memoryPeak`: the highest guest usage seen so far (see MemoryPeaks). */
export function runningState(pid: number, status: InstanceStatus, taps: Tap[], guest?: GuestState, memoryPeak = 0): RuntimeState {
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
    cpu: { usage: guest?.cpuNs ?? processCpuNs(pid) },
    memory: { usage: guest?.memory.usage ?? 0, usage_peak: guest ? Math.max(memoryPeak, guest.memory.usage) : memoryPeak, swap_usage: 0, swap_usage_peak: 0 },
    network,
  };
}
