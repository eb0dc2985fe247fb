/**
 * The `lxd_`-prefixed families of the reference, in its order, with its label sets, so existing
 * Prometheus scrape configs, recording rules and dashboards keep working against corral.
 */
import { MEMORY_FIGURES, type InstanceMetricsEntry, type MemoryFigure } from '../../sdk/index.js';
import type { Family, FamilyType, Sample } from './exposition.js';

type Labels = Record<string, string>;

const MEMORY_HELP: Record<MemoryFigure, string> = {
  Active_anon: 'Anonymous memory on the active LRU list, in bytes.',
  Active_file: 'File-backed memory on the active LRU list, in bytes.',
  Active: 'Memory on the active LRU list, in bytes.',
  Cached: 'Page cache memory, in bytes.',
  Dirty: 'Memory waiting to be written back to disk, in bytes.',
  Inactive_anon: 'Anonymous memory on the inactive LRU list, in bytes.',
  Inactive_file: 'File-backed memory on the inactive LRU list, in bytes.',
  Inactive: 'Memory on the inactive LRU list, in bytes.',
  Mapped: 'Memory mapped into processes, in bytes.',
  MemAvailable: 'Memory available to the instance (free plus reclaimable cache), in bytes.',
  MemFree: 'Memory the instance may still use, in bytes.',
  MemTotal: 'Memory the instance may use in all (its limit, or the host total), in bytes.',
  RSS: 'Anonymous and swap cache memory, in bytes.',
  Shmem: 'Swap-backed shared memory (tmpfs, shm), in bytes.',
  Swap: 'Swap in use, in bytes.',
  Unevictable: 'Memory that cannot be reclaimed, in bytes.',
  Writeback: 'Memory being written back to disk, in bytes.',
};

class FamilyBuilder {
  private readonly families: Family[] = [];
  private readonly byName = new Map<string, Family>();

  family(name: string, type: FamilyType, help: string): Sample[] {
    let f = this.byName.get(name);
    if (!f) {
      f = { name, type, help, samples: [] };
      this.families.push(f);
      this.byName.set(name, f);
    }
    return f.samples;
  }

  add(name: string, type: FamilyType, help: string, labels: Labels, value: number): void {
    this.family(name, type, help).push({ labels, value });
  }

  get all(): Family[] {
    return this.families;
  }
}

/** Every family in the reference's order, so empty ones can be skipped without reordering the rest. */
export function instanceFamilies(entries: InstanceMetricsEntry[]): Family[] {
  const b = new FamilyBuilder();
  const base = (e: InstanceMetricsEntry): Labels => ({ name: e.name, project: e.project, type: e.type });
  // Declared up front: the order of families does not depend on which instance has which figures.
  b.family('lxd_cpu_seconds_total', 'counter', 'CPU time used, in seconds.');
  for (const [name, help] of [
    ['lxd_disk_read_bytes_total', 'Bytes read from a block device.'],
    ['lxd_disk_reads_completed_total', 'Reads completed on a block device.'],
    ['lxd_disk_written_bytes_total', 'Bytes written to a block device.'],
    ['lxd_disk_writes_completed_total', 'Writes completed on a block device.'],
  ] as const) b.family(name, 'counter', help);
  b.family('lxd_filesystem_avail_bytes', 'gauge', 'Space available to unprivileged users, in bytes.');
  b.family('lxd_filesystem_free_bytes', 'gauge', 'Free space, in bytes.');
  b.family('lxd_filesystem_size_bytes', 'gauge', 'Size of the filesystem, in bytes.');
  for (const m of MEMORY_FIGURES) b.family(`lxd_memory_${m}_bytes`, 'gauge', MEMORY_HELP[m]);
  const NET = [
    ['receive_bytes', 'receiveBytes', 'Bytes received on an interface.'],
    ['receive_drop', 'receiveDrop', 'Received packets dropped on an interface.'],
    ['receive_errs', 'receiveErrs', 'Receive errors on an interface.'],
    ['receive_packets', 'receivePackets', 'Packets received on an interface.'],
    ['transmit_bytes', 'transmitBytes', 'Bytes sent on an interface.'],
    ['transmit_drop', 'transmitDrop', 'Sent packets dropped on an interface.'],
    ['transmit_errs', 'transmitErrs', 'Transmit errors on an interface.'],
    ['transmit_packets', 'transmitPackets', 'Packets sent on an interface.'],
  ] as const;
  for (const [suffix, , help] of NET) b.family(`lxd_network_${suffix}_total`, 'counter', help);
  b.family('lxd_procs_total', 'gauge', 'Processes running in the instance.');

  for (const e of entries) {
    const m = e.metrics;
    // One labels object per label set: the exposition renders each once, however many samples share it.
    const labels = base(e);
    for (const c of m.cpu) {
      b.add('lxd_cpu_seconds_total', 'counter', '', { ...labels, cpu: c.cpu, mode: 'system' }, c.system);
      b.add('lxd_cpu_seconds_total', 'counter', '', { ...labels, cpu: c.cpu, mode: 'user' }, c.user);
    }
    for (const d of m.disk) {
      const disk = { ...labels, device: d.device };
      b.add('lxd_disk_read_bytes_total', 'counter', '', disk, d.readBytes);
      b.add('lxd_disk_reads_completed_total', 'counter', '', disk, d.readsCompleted);
      b.add('lxd_disk_written_bytes_total', 'counter', '', disk, d.writtenBytes);
      b.add('lxd_disk_writes_completed_total', 'counter', '', disk, d.writesCompleted);
    }
    for (const f of m.filesystems) {
      // The reference labels filesystems without `type`; dashboards select on these labels.
      const fs = { name: e.name, project: e.project, device: f.device, fstype: f.fstype, mountpoint: f.mountpoint };
      b.add('lxd_filesystem_avail_bytes', 'gauge', '', fs, f.availBytes);
      b.add('lxd_filesystem_free_bytes', 'gauge', '', fs, f.freeBytes);
      b.add('lxd_filesystem_size_bytes', 'gauge', '', fs, f.sizeBytes);
    }
    for (const figure of MEMORY_FIGURES) {
      const value = m.memory[figure];
      if (value !== undefined) b.add(`lxd_memory_${figure}_bytes`, 'gauge', '', labels, value);
    }
    for (const n of m.network) {
      const nic = { ...labels, device: n.device };
      for (const [suffix, field] of NET) b.add(`lxd_network_${suffix}_total`, 'counter', '', nic, n[field]);
    }
    b.add('lxd_procs_total', 'gauge', '', labels, m.processes);
  }
  return b.all;
}

export interface DaemonFigures {
  runningOperations: number;
  uptimeSeconds: number;
}

/** Server-wide figures of later reference releases that mean the same for a Node daemon (no Go runtime ones). */
export function daemonFamilies(f: DaemonFigures): Family[] {
  return [
    { name: 'lxd_operations_total', type: 'gauge', help: 'Operations not yet finished.', samples: [{ labels: {}, value: f.runningOperations }] },
    { name: 'lxd_uptime_seconds', type: 'gauge', help: 'Seconds since the daemon started.', samples: [{ labels: {}, value: f.uptimeSeconds }] },
  ];
}
