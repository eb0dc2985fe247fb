/**
 * `GET /1.0/metrics` figures of a running VM, read without spawning anything: the QEMU process's
 * CPU time (all vCPUs and QEMU's own work, as one `cpu 0`), the RAM given to the guest (MemTotal)
 * and what its agent sees available (MemAvailable, from its /proc/meminfo) with QEMU's resident
 * memory beside them as RSS, each disk's I/O as QEMU counts it per drive (QMP; the QEMU process's own I/O when QMP
 * does not answer), and the NICs' tap counters turned to the guest's side (what the tap sends,
 * the guest receives).
 */
import { readFileSync } from 'node:fs';
import type { DiskIo, InstanceMetrics, InterfaceCounters } from '../../sdk/index.js';
import type { GuestState } from './agent/contract.js';
import type { Tap } from './taps.js';

const CLOCK_TICKS = 100;

const read = (file: string): string | undefined => {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
};

const num = (text: string | undefined, re: RegExp) => Number(re.exec(text ?? '')?.[1] ?? 0) || 0;

function tapCounters(tap: Tap, guestName: string): InterfaceCounters {
  const c = (name: string) => Number(read(`/sys/class/net/${tap.name}/statistics/${name}`)?.trim() ?? 0) || 0;
  return {
    device: guestName,
    receiveBytes: c('tx_bytes'), receivePackets: c('tx_packets'), receiveErrs: c('tx_errors'), receiveDrop: c('tx_dropped'),
    transmitBytes: c('rx_bytes'), transmitPackets: c('rx_packets'), transmitErrs: c('rx_errors'), transmitDrop: c('rx_dropped'),
  };
}

/**
 * `nicNames`: device name -> interface name in the guest (the NIC's `name` option, else the device
 * name); `guest`: the agent's report when it answered; `disks`: QEMU's per-drive counters.
 */
export function readVmMetrics(pid: number, guestMemoryBytes: number, taps: Tap[], nicNames: Record<string, string>, guest?: GuestState, disks?: DiskIo[]): InstanceMetrics {
  const stat = read(`/proc/${pid}/stat`) ?? '';
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const status = read(`/proc/${pid}/status`);
  const io = read(`/proc/${pid}/io`);
  const rss = num(status, /^VmRSS:\s+(\d+)/m) * 1024;
  return {
    cpu: [{ cpu: '0', user: Number(fields[11] ?? 0) / CLOCK_TICKS, system: Number(fields[12] ?? 0) / CLOCK_TICKS }],
    memory: guest && guest.memory.total > 0
      // The agent reports the guest's MemTotal and MemAvailable; MemTotal stays the RAM the VM was given (its limit, as for containers).
      ? { MemTotal: guestMemoryBytes, MemAvailable: Math.max(0, guest.memory.total - guest.memory.usage), RSS: rss, Swap: 0 }
      : { MemTotal: guestMemoryBytes, RSS: rss, MemFree: Math.max(0, guestMemoryBytes - rss), Swap: num(status, /^VmSwap:\s+(\d+)/m) * 1024 },
    disk: disks ?? [{
      device: 'vda',
      readBytes: num(io, /^read_bytes:\s+(\d+)/m), readsCompleted: num(io, /^syscr:\s+(\d+)/m),
      writtenBytes: num(io, /^write_bytes:\s+(\d+)/m), writesCompleted: num(io, /^syscw:\s+(\d+)/m),
    }],
    filesystems: [],
    network: taps.map((tap) => tapCounters(tap, nicNames[tap.device] ?? tap.device)),
    processes: guest?.processes ?? 0,
  };
}
