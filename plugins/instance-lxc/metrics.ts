/**
 * GET /1.0/metrics figures of a running container, read from its cgroup (v1 or v2 hierarchy,
 * whichever holds each controller), its init's network namespace and statfs of its disks. Reads
 * only, most of them made by the live-state helper beside the event loop (live-state.ts): a scrape
 * covers every running instance and must not spawn anything per instance.
 */
import { statfsSync } from 'node:fs';
import path from 'node:path';
import type {
  CpuTime, DeviceConfig, DiskIo, DriverInstance, FilesystemUsage, InstanceMetrics, InterfaceCounters, MemoryFigure,
} from '../../sdk/index.js';
import { readText, type ContainerCgroup } from './cgroups.js';
import type { LiveState } from './live-state.js';
import { parseNetDev } from './network-state.js';

const NS_PER_S = 1e9;
const US_PER_S = 1e6;
/** USER_HZ of cpuacct.stat: 100 on every Linux architecture corral runs on. */
const TICKS_PER_S = 100;

/** `key value` lines (memory.stat, cpu.stat). */
export function parseKeyValues(text: string | undefined): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of (text ?? '').split('\n')) {
    const [key, value] = line.trim().split(/\s+/);
    if (key && value !== undefined && /^\d+$/.test(value)) out.set(key, Number(value));
  }
  return out;
}

/** cpuacct.usage_all: a header, then `<cpu> <user ns> <system ns>` per CPU. */
export function parseUsageAll(text: string): CpuTime[] {
  const out: CpuTime[] = [];
  for (const line of text.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length !== 3 || !f.every((x) => /^\d+$/.test(x))) continue;
    out.push({ cpu: f[0]!, user: Number(f[1]) / NS_PER_S, system: Number(f[2]) / NS_PER_S });
  }
  return out;
}

function cpuTimes(cg: ContainerCgroup): CpuTime[] {
  const all = cg.file('cpuacct', 'cpuacct.usage_all', 'cpu.stat');
  if (all?.version === 1) {
    const perCpu = parseUsageAll(cg.text(all) ?? '');
    if (perCpu.length) return perCpu;
    const ticks = parseKeyValues(cg.read('cpuacct', 'cpuacct.stat', 'cpu.stat'));
    return [{ cpu: '0', user: (ticks.get('user') ?? 0) / TICKS_PER_S, system: (ticks.get('system') ?? 0) / TICKS_PER_S }];
  }
  // cgroup v2 keeps no per-CPU split: the totals are reported as CPU 0.
  const stat = parseKeyValues(cg.read('cgroup', 'cpu.stat', 'cpu.stat'));
  if (!stat.size) return [];
  return [{ cpu: '0', user: (stat.get('user_usec') ?? 0) / US_PER_S, system: (stat.get('system_usec') ?? 0) / US_PER_S }];
}

/** memory.stat names per hierarchy for the figures read straight from it. */
const MEMORY_STAT_NAMES: [MemoryFigure, string, string][] = [
  ['Active_anon', 'active_anon', 'active_anon'],
  ['Active_file', 'active_file', 'active_file'],
  ['Inactive_anon', 'inactive_anon', 'inactive_anon'],
  ['Inactive_file', 'inactive_file', 'inactive_file'],
  ['Cached', 'cache', 'file'],
  ['Dirty', 'dirty', 'file_dirty'],
  ['Mapped', 'mapped_file', 'file_mapped'],
  ['RSS', 'rss', 'anon'],
  ['Shmem', 'shmem', 'shmem'],
  ['Unevictable', 'unevictable', 'unevictable'],
  ['Writeback', 'writeback', 'file_writeback'],
];

function memoryFigures(cg: ContainerCgroup, hostTotal: number): Partial<Record<MemoryFigure, number>> {
  const where = cg.file('memory', 'memory.stat', 'memory.stat');
  if (!where) return {};
  const v1 = where.version === 1;
  const stat = parseKeyValues(cg.text(where));
  const out: Partial<Record<MemoryFigure, number>> = {};
  for (const [figure, v1Name, v2Name] of MEMORY_STAT_NAMES) out[figure] = stat.get(v1 ? v1Name : v2Name) ?? 0;
  out.Active = out.Active_anon! + out.Active_file!;
  out.Inactive = out.Inactive_anon! + out.Inactive_file!;
  // v1 counts swap in memory.stat only with swap accounting on; v2 has its own file.
  out.Swap = v1 ? stat.get('swap') ?? 0 : cg.number('memory', '', 'memory.swap.current') ?? 0;
  const usage = cg.number('memory', 'memory.usage_in_bytes', 'memory.current') ?? 0;
  // No limit reads as "max" (v2) or a huge page-aligned number (v1): the host's memory is the ceiling.
  const limit = cg.number('memory', 'memory.limit_in_bytes', 'memory.max');
  const total = limit !== undefined && limit > 0 && limit < hostTotal ? limit : hostTotal;
  out.MemTotal = total;
  out.MemFree = Math.max(0, total - usage);
  out.MemAvailable = out.MemFree + out.Cached!;
  return out;
}

/** Block device names by `major:minor`, from sysfs (cached: devices rarely come and go). */
export class BlockDeviceNames {
  private readonly names = new Map<string, string>();

  name(majorMinor: string): string {
    let name = this.names.get(majorMinor);
    if (name === undefined) {
      const uevent = readText(`/sys/dev/block/${majorMinor}/uevent`) ?? '';
      name = /^DEVNAME=(.+)$/m.exec(uevent)?.[1]?.trim() ?? majorMinor;
      this.names.set(majorMinor, name);
    }
    return name;
  }
}

/** v2 io.stat: `<maj:min> rbytes=.. wbytes=.. rios=.. wios=.. ...` per device. */
export function parseIoStat(text: string, names: BlockDeviceNames): DiskIo[] {
  const out: DiskIo[] = [];
  for (const line of text.split('\n')) {
    const [dev, ...fields] = line.trim().split(/\s+/);
    if (!dev || !/^\d+:\d+$/.test(dev)) continue;
    const v = new Map(fields.map((f) => f.split('=') as [string, string]));
    const n = (k: string) => Number(v.get(k) ?? 0) || 0;
    out.push({ device: names.name(dev), readBytes: n('rbytes'), readsCompleted: n('rios'), writtenBytes: n('wbytes'), writesCompleted: n('wios') });
  }
  return out;
}

/** v1 blkio.throttle files: `<maj:min> Read|Write|Sync|Async|Discard|Total <n>` lines, read and write kept. */
export function parseBlkio(bytes: string, ios: string, names: BlockDeviceNames): DiskIo[] {
  const byDevice = new Map<string, DiskIo>();
  const entry = (dev: string) => {
    let e = byDevice.get(dev);
    if (!e) byDevice.set(dev, (e = { device: names.name(dev), readBytes: 0, readsCompleted: 0, writtenBytes: 0, writesCompleted: 0 }));
    return e;
  };
  const read = (text: string, onRead: (e: DiskIo, n: number) => void, onWrite: (e: DiskIo, n: number) => void) => {
    for (const line of text.split('\n')) {
      const [dev, op, value] = line.trim().split(/\s+/);
      if (!dev || !/^\d+:\d+$/.test(dev) || value === undefined) continue;
      if (op === 'Read') onRead(entry(dev), Number(value) || 0);
      else if (op === 'Write') onWrite(entry(dev), Number(value) || 0);
    }
  };
  read(bytes, (e, n) => (e.readBytes = n), (e, n) => (e.writtenBytes = n));
  read(ios, (e, n) => (e.readsCompleted = n), (e, n) => (e.writesCompleted = n));
  return [...byDevice.values()];
}

function diskIo(cg: ContainerCgroup, names: BlockDeviceNames): DiskIo[] {
  const v1 = cg.file('blkio', 'blkio.throttle.io_service_bytes_recursive', 'io.stat');
  if (v1?.version === 1) {
    return parseBlkio(cg.text(v1) ?? '', cg.read('blkio', 'blkio.throttle.io_serviced_recursive', '') ?? '', names);
  }
  return parseIoStat(cg.read('io', '', 'io.stat') ?? '', names);
}

/** statfs magic numbers of the filesystems an instance's disks are likely to sit on. */
const FS_TYPES = new Map<number, string>([
  [0xef53, 'ext4'], [0x58465342, 'xfs'], [0x9123683e, 'btrfs'], [0x2fc12fc1, 'zfs'], [0x01021994, 'tmpfs'],
  [0x794c7630, 'overlay'], [0x73717368, 'squashfs'], [0x6969, 'nfs'], [0x00c36400, 'ceph'], [0x65735546, 'fuse'],
  [0x5346544e, 'ntfs'], [0x4d44, 'vfat'], [0xf2f52010, 'f2fs'],
]);

function usageOf(hostPath: string, mountpoint: string): FilesystemUsage | undefined {
  try {
    const s = statfsSync(hostPath, { bigint: false });
    return {
      device: '',
      fstype: FS_TYPES.get(s.type) ?? `0x${s.type.toString(16)}`,
      mountpoint,
      sizeBytes: s.blocks * s.bsize,
      freeBytes: s.bfree * s.bsize,
      availBytes: s.bavail * s.bsize,
    };
  } catch {
    return undefined;
  }
}

/** The root disk (the instance volume) and disk devices that pass a host path through. */
function filesystems(inst: DriverInstance): FilesystemUsage[] {
  const out: FilesystemUsage[] = [];
  const disks = Object.values(inst.devices).filter((d: DeviceConfig) => d.type === 'disk' && d.path);
  for (const d of disks.sort((a, b) => (a.path === '/' ? -1 : b.path === '/' ? 1 : 0))) {
    if (d.path === '/') {
      if (!inst.volumePath) continue;
      const root = usageOf(inst.volumePath, '/');
      if (root) out.push(root);
    } else if (!d.pool && d.source && path.isAbsolute(d.source)) {
      const usage = usageOf(d.source, d.path!);
      if (usage) out.push(usage);
    }
  }
  return out;
}

/** Counters of each interface: from the live-state helper's answer, else /proc/<pid>/net/dev. */
function interfaces(pid: number, live: LiveState | undefined): InterfaceCounters[] {
  const counters = live
    ? Object.entries(live.network).map(([device, n]) => [device, n.counters] as const)
    : [...parseNetDev(readText(`/proc/${pid}/net/dev`) ?? '')];
  return counters.map(([device, c]) => ({
    device,
    receiveBytes: c.bytes_received, receivePackets: c.packets_received, receiveErrs: c.errors_received, receiveDrop: c.packets_dropped_inbound,
    transmitBytes: c.bytes_sent, transmitPackets: c.packets_sent, transmitErrs: c.errors_sent, transmitDrop: c.packets_dropped_outbound,
  }));
}

/** The figures' reads of a cgroup, so that they can be made ahead (by the live-state helper). */
function cgroupFigures(cg: ContainerCgroup, names: BlockDeviceNames, hostTotal: number): Pick<InstanceMetrics, 'cpu' | 'memory' | 'disk' | 'processes'> {
  return {
    cpu: cpuTimes(cg),
    memory: memoryFigures(cg, hostTotal),
    disk: diskIo(cg, names),
    processes: cg.number('pids', 'pids.current', 'pids.current') ?? 0,
  };
}

/** The cgroup files the figures read, without reading them. */
export function metricsFiles(cg: ContainerCgroup): string[] {
  return cg.filesRead((view) => cgroupFigures(view, new BlockDeviceNames(), 0));
}

/**
 * `cg`: the container's cgroup, or a view of it holding the files of metricsFiles read already; `live`:
 * what the helper told, whose interfaces are read from /proc here when absent.
 */
export function readMetrics(inst: DriverInstance, initPid: number, cg: ContainerCgroup, names: BlockDeviceNames, hostTotal: number, live?: LiveState): InstanceMetrics {
  const { cpu, memory, disk, processes } = cgroupFigures(cg, names, hostTotal);
  return { cpu, memory, disk, filesystems: filesystems(inst), network: interfaces(initPid, live), processes };
}
