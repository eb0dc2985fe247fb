/**
 * The `cpu` section: sockets, dies, cores and threads from /sys/devices/system/cpu, names and
 * vendors from /proc/cpuinfo, caches, NUMA placement, isolation and (with cpufreq) frequencies.
 */
import os from 'node:os';
import { HostReader, naturalCompare, omitEmpty, parseColonBlocks, parseList, parseSize } from './sysfs.js';
import type { CpuCache, CpuCore, CpuResources, CpuSocket, CpuThread } from './types.js';

const CPU = '/sys/devices/system/cpu';

interface ThreadInfo {
  id: number;
  socket: number;
  die: number;
  core: number;
  numaNode: number;
  online: boolean;
  /** kHz, from cpufreq */
  cur?: number;
  min?: number;
  max?: number;
}

/** What /proc/cpuinfo says of each logical cpu, by processor number. */
function cpuinfo(text: string | undefined): Map<number, Map<string, string>> {
  const out = new Map<number, Map<string, string>>();
  const blocks = parseColonBlocks(text);
  for (const block of blocks) {
    const id = block.get('processor');
    if (id !== undefined && /^\d+$/.test(id)) out.set(Number(id), block);
  }
  // Some architectures (arm64) print shared fields such as `Hardware` in a trailing block.
  const shared = blocks.find((b) => !b.has('processor'));
  if (shared) for (const block of out.values()) for (const [k, v] of shared) if (!block.has(k)) block.set(k, v);
  return out;
}

/** Vendor names of the arm64 `CPU implementer` codes. */
const ARM_IMPLEMENTERS: Record<string, string> = {
  '0x41': 'ARM', '0x42': 'Broadcom', '0x43': 'Cavium', '0x48': 'HiSilicon', '0x4e': 'NVIDIA',
  '0x50': 'APM', '0x51': 'Qualcomm', '0x53': 'Samsung', '0x61': 'Apple', '0x63': 'Arm China',
  '0x69': 'Intel', '0x6d': 'Microsoft', '0xc0': 'Ampere',
};

function socketName(info: Map<string, string> | undefined): string {
  return info?.get('model name') ?? info?.get('cpu model') ?? info?.get('cpu') ?? info?.get('Hardware') ?? '';
}

function socketVendor(info: Map<string, string> | undefined): string {
  const vendor = info?.get('vendor_id') ?? info?.get('vendor');
  if (vendor) return vendor;
  const implementer = info?.get('CPU implementer');
  return implementer ? ARM_IMPLEMENTERS[implementer.toLowerCase()] ?? '' : '';
}

async function threadInfo(host: HostReader, id: number, online: Set<number>): Promise<ThreadInfo | undefined> {
  const dir = `${CPU}/cpu${id}`;
  const [socket, die, core, entries] = await Promise.all([
    host.int(`${dir}/topology/physical_package_id`),
    host.int(`${dir}/topology/die_id`),
    host.int(`${dir}/topology/core_id`),
    host.list(dir),
  ]);
  // An offline thread has no topology: nothing tells which socket or core it belongs to.
  if (socket === undefined || core === undefined) return undefined;
  const node = entries.find((e) => /^node\d+$/.test(e));
  const info: ThreadInfo = {
    id,
    socket: socket < 0 ? 0 : socket,
    die: die !== undefined && die > 0 ? die : 0,
    core,
    numaNode: node ? Number(node.slice(4)) : 0,
    online: online.has(id),
  };
  if (entries.includes('cpufreq')) {
    const [cur, min, max] = await Promise.all([
      host.int(`${dir}/cpufreq/scaling_cur_freq`),
      host.int(`${dir}/cpufreq/cpuinfo_min_freq`),
      host.int(`${dir}/cpufreq/cpuinfo_max_freq`),
    ]);
    Object.assign(info, { cur, min, max });
  }
  return info;
}

async function caches(host: HostReader, cpu: number): Promise<CpuCache[]> {
  const dir = `${CPU}/cpu${cpu}/cache`;
  const indexes = (await host.list(dir)).filter((e) => /^index\d+$/.test(e));
  const out = await Promise.all(indexes.map(async (index): Promise<CpuCache | undefined> => {
    const [level, type, size] = await Promise.all([
      host.int(`${dir}/${index}/level`), host.text(`${dir}/${index}/type`), host.text(`${dir}/${index}/size`),
    ]);
    if (level === undefined) return undefined;
    return { level, type: type ?? '', size: parseSize(size) ?? 0 };
  }));
  return out.filter((c): c is CpuCache => c !== undefined);
}

const mhz = (khz: number | undefined) => (khz && khz > 0 ? Math.round(khz / 1000) : 0);

export async function collectCpu(host: HostReader): Promise<CpuResources> {
  const [entries, onlineList, isolatedList, infoText] = await Promise.all([
    host.list(CPU), host.text(`${CPU}/online`), host.text(`${CPU}/isolated`), host.raw('/proc/cpuinfo'),
  ]);
  const ids = entries.filter((e) => /^cpu\d+$/.test(e)).map((e) => Number(e.slice(3))).sort((a, b) => a - b);
  const online = new Set(onlineList === undefined ? ids : parseList(onlineList));
  const isolated = new Set(parseList(isolatedList));
  const info = cpuinfo(infoText);
  const threads = (await Promise.all(ids.map((id) => threadInfo(host, id, online)))).filter((t): t is ThreadInfo => t !== undefined);

  const bySocket = new Map<number, ThreadInfo[]>();
  for (const t of threads) bySocket.set(t.socket, [...(bySocket.get(t.socket) ?? []), t]);

  const sockets: CpuSocket[] = [];
  for (const socketId of [...bySocket.keys()].sort((a, b) => a - b)) {
    const members = bySocket.get(socketId)!;
    const first = members[0]!;
    const described = members.find((t) => info.has(t.id));
    const byCore = new Map<string, ThreadInfo[]>();
    for (const t of members) {
      const key = `${t.die}:${t.core}`;
      byCore.set(key, [...(byCore.get(key) ?? []), t]);
    }
    const cores: CpuCore[] = [...byCore.keys()].sort(naturalCompare).map((key) => {
      const coreThreads = byCore.get(key)!.sort((a, b) => a.id - b.id);
      const core: CpuCore = {
        core: coreThreads[0]!.core,
        die: coreThreads[0]!.die,
        threads: coreThreads.map((t, i): CpuThread => ({ id: t.id, numa_node: t.numaNode, thread: i, online: t.online, isolated: isolated.has(t.id) })),
        frequency: Math.max(0, ...coreThreads.map((t) => mhz(t.cur))),
      };
      return omitEmpty(core, ['frequency']);
    });
    cores.sort((a, b) => a.die - b.die || a.core - b.core);
    const coreFrequencies = cores.map((c) => c.frequency ?? 0).filter((f) => f > 0);
    const mins = members.map((t) => mhz(t.min)).filter((f) => f > 0);
    const socket: CpuSocket = {
      name: socketName(info.get(described?.id ?? first.id)),
      vendor: socketVendor(info.get(described?.id ?? first.id)),
      socket: socketId,
      cache: await caches(host, first.id),
      cores,
      frequency: coreFrequencies.length ? Math.round(coreFrequencies.reduce((a, b) => a + b, 0) / coreFrequencies.length) : 0,
      frequency_minimum: mins.length ? Math.min(...mins) : 0,
      frequency_turbo: Math.max(0, ...members.map((t) => mhz(t.max))),
    };
    sockets.push(omitEmpty(socket, ['name', 'vendor', 'cache', 'frequency', 'frequency_minimum', 'frequency_turbo']));
  }

  return {
    architecture: os.machine(),
    sockets,
    total: sockets.reduce((n, s) => n + s.cores.reduce((m, c) => m + c.threads.length, 0), 0),
  };
}
