/**
 * `limits.cpu`, `limits.memory` and `limits.processes`: parsed once into the cgroup file and value
 * each one sets, so that the generated config and a live update write the same thing.
 */
import { createHash } from 'node:crypto';
import { parseCpuSet } from '../../sdk/index.js';

export type Controller = 'memory' | 'pids' | 'cpuset' | 'hugetlb' | 'cpu';

export interface CgroupLimit {
  key: string;
  controller: Controller;
  /** File name in a cgroup v1 hierarchy and in the unified (v2) one. */
  v1: string;
  v2: string;
  value: string;
}

/** What a limit is computed against. */
export interface HostCapacity {
  totalMemory: number;
  /** Online CPU ids, ascending. */
  cpus: number[];
}

export const LIMIT_KEYS = ['limits.cpu', 'limits.memory', 'limits.processes'] as const;

const UNITS: Record<string, number> = {
  '': 1, B: 1,
  kB: 1e3, KB: 1e3, MB: 1e6, GB: 1e9, TB: 1e12, PB: 1e15, EB: 1e18,
  KiB: 2 ** 10, MiB: 2 ** 20, GiB: 2 ** 30, TiB: 2 ** 40, PiB: 2 ** 50, EiB: 2 ** 60,
};

/** Bytes of `limits.memory`: a size with an optional unit, or a percentage of the host's memory. */
export function parseMemory(value: string, totalMemory: number): number {
  const pct = /^(\d+(?:\.\d+)?)%$/.exec(value);
  if (pct) {
    const p = Number(pct[1]);
    if (p <= 0 || p > 100) throw new Error(`Invalid value: ${value}`);
    return Math.floor((totalMemory * p) / 100);
  }
  const m = /^(\d+(?:\.\d+)?)\s*([A-Za-z]*)$/.exec(value);
  if (!m || !(m[2]! in UNITS)) throw new Error(`Invalid value: ${value}`);
  const bytes = Math.floor(Number(m[1]) * UNITS[m[2]!]!);
  if (bytes <= 0) throw new Error(`Invalid value: ${value}`);
  return bytes;
}

/** Bytes of a size with an optional unit (no percentage): hugepage limits. */
export function parseByteSize(value: string): number {
  if (value.endsWith('%')) throw new Error(`Invalid value: ${value} (a size such as 64MB, not a percentage)`);
  return parseMemory(value, 1);
}

export function checkMemory(value: string): void {
  parseMemory(value, 1);
}

/** `limits.cpu`: a count of CPUs (undefined here), or a list of ids and ranges (`0-1,3`). */
export function parseCpuList(value: string): number[] | undefined {
  if (/^\d+$/.test(value)) return undefined;
  try {
    return parseCpuSet(value);
  } catch (err) {
    throw new Error(`Invalid CPU limit: ${(err as Error).message}`);
  }
}

export function checkCpu(value: string): void {
  parseCpuList(value);
}

/** Compact cpuset form of a list of ids: `0-2,5`. */
export function formatCpuList(ids: number[]): string {
  const parts: string[] = [];
  for (let i = 0; i < ids.length; i++) {
    let j = i;
    while (j + 1 < ids.length && ids[j + 1] === ids[j]! + 1) j++;
    parts.push(i === j ? `${ids[i]}` : `${ids[i]}-${ids[j]}`);
    i = j;
  }
  return parts.join(',');
}

/**
 * The CPUs a count pins to. Each instance starts at its own offset (from its name) so that many
 * small containers spread over the host instead of piling onto CPU 0.
 */
export function pickCpus(count: number, cpus: number[], seed: string): number[] {
  if (count >= cpus.length) return [...cpus];
  const offset = createHash('sha256').update(seed).digest().readUInt32BE(0) % cpus.length;
  const picked = Array.from({ length: count }, (_, i) => cpus[(offset + i) % cpus.length]!);
  return picked.sort((a, b) => a - b);
}

/** Online CPU ids from the kernel's list (`0-3,6`). */
export function parseOnlineCpus(text: string): number[] {
  try {
    return parseCpuList(text.trim()) ?? [Number(text.trim())];
  } catch {
    return [0];
  }
}

/** The cgroup value of one limit key; an empty or absent value lifts the limit. */
export function cgroupLimit(key: string, value: string | undefined, host: HostCapacity, seed: string): CgroupLimit | undefined {
  const set = value !== undefined && value !== '';
  switch (key) {
    case 'limits.memory':
      if (!set) return { key, controller: 'memory', v1: 'memory.limit_in_bytes', v2: 'memory.max', value: '' };
      return { key, controller: 'memory', v1: 'memory.limit_in_bytes', v2: 'memory.max', value: String(parseMemory(value, host.totalMemory)) };
    case 'limits.processes': {
      const n = set ? Number(value) : 0;
      return { key, controller: 'pids', v1: 'pids.max', v2: 'pids.max', value: n > 0 ? String(n) : 'max' };
    }
    case 'limits.cpu': {
      const list = set ? parseCpuList(value) : undefined;
      const count = set && !list ? Number(value) : 0;
      const ids = list ?? (count > 0 ? pickCpus(count, host.cpus, seed) : host.cpus);
      return { key, controller: 'cpuset', v1: 'cpuset.cpus', v2: 'cpuset.cpus', value: formatCpuList(ids) };
    }
    default:
      return undefined;
  }
}

/** Limits to put in the config at start: only keys that are set. */
export function startLimits(config: Record<string, string>, host: HostCapacity, seed: string): CgroupLimit[] {
  return LIMIT_KEYS.filter((k) => config[k]).map((k) => cgroupLimit(k, config[k], host, seed)!);
}

/** The value that lifts a limit, per cgroup version (v1 memory takes -1, the others `max`). */
export function unlimitedValue(limit: CgroupLimit, version: 1 | 2, allCpus: string): string {
  if (limit.value !== '') return limit.value;
  if (limit.controller === 'cpuset') return allCpus;
  return (limit.controller === 'memory' || limit.controller === 'hugetlb') && version === 1 ? '-1' : 'max';
}
