/**
 * The `limits.*` keys of a project: counts (instances, containers, virtual machines, networks)
 * and aggregates summed over what the project holds (CPUs, memory, processes, disk). Once a
 * project sets an aggregate limit, every instance in it must state its own share (the key
 * itself, or the root disk's `size` for `limits.disk`), so the sum means something.
 */
import { ApiError, type InstanceType } from '../../../sdk/index.js';
import { rootDisk, type InstanceEntry, type ProjectContents, type VolumeEntry } from './contents.js';
import { formatBytes, parseBytes, parseCount } from './units.js';
import type { ProjectConfig } from './restrictions.js';

export const COUNT_LIMITS: Record<string, InstanceType | undefined> = {
  'limits.instances': undefined,
  'limits.containers': 'container',
  'limits.virtual-machines': 'virtual-machine',
};

export const AGGREGATE_LIMITS = ['limits.cpu', 'limits.disk', 'limits.memory', 'limits.processes'] as const;
export type AggregateLimit = (typeof AGGREGATE_LIMITS)[number];

const BYTE_LIMITS = new Set<string>(['limits.disk', 'limits.memory']);

/** The project's value of a limit as a number (bytes or a count). */
export function limitValue(key: string, value: string): number {
  return BYTE_LIMITS.has(key) ? parseBytes(value) : parseCount(value);
}

export const showAmount = (key: string, n: number) => (BYTE_LIMITS.has(key) ? formatBytes(n) : String(n));

export function countOf(instances: InstanceEntry[], key: string): number {
  const type = COUNT_LIMITS[key];
  return instances.filter((i) => type === undefined || i.type === type).length;
}

/** What one instance takes of an aggregate limit; 400 when it doesn't say or says it in a form that cannot be summed. */
export function instanceShare(project: string, inst: InstanceEntry, key: AggregateLimit): number {
  const who = `Instance "${inst.name}"`;
  const why = `because project "${project}" sets ${key}`;
  if (key === 'limits.disk') {
    const size = rootDisk(inst.devices)?.size;
    if (!size) throw new ApiError(400, `${who} must give its root disk a size (directly or through a profile) ${why}`);
    try {
      return parseBytes(size);
    } catch {
      throw new ApiError(400, `${who} has a root disk size "${size}" that is not a size`);
    }
  }
  const value = inst.config[key];
  if (!value) throw new ApiError(400, `${who} must set ${key} (directly or through a profile) ${why}`);
  if (key === 'limits.memory' && value.trim().endsWith('%')) {
    throw new ApiError(400, `${who} must give limits.memory as an absolute size, not a percentage ("${value}"), ${why}`);
  }
  if (key === 'limits.cpu' && !/^\d+$/.test(value)) {
    throw new ApiError(400, `${who} must give limits.cpu as a number of CPUs, not pinned CPUs ("${value}"), ${why}`);
  }
  try {
    return limitValue(key, value);
  } catch (err) {
    throw new ApiError(400, `${who} has an invalid ${key}: ${(err as Error).message}`);
  }
}

export function volumeShare(project: string, vol: VolumeEntry): number {
  if (!vol.size) throw new ApiError(400, `Custom volume "${vol.name}" on pool "${vol.pool}" must have a size because project "${project}" sets limits.disk`);
  try {
    return parseBytes(vol.size);
  } catch {
    throw new ApiError(400, `Custom volume "${vol.name}" has a size "${vol.size}" that is not a size`);
  }
}

/** The project's total of an aggregate limit over `contents`. */
export function aggregateTotal(project: string, contents: ProjectContents, key: AggregateLimit): number {
  let total = 0;
  for (const inst of contents.instances) total += instanceShare(project, inst, key);
  if (key === 'limits.disk') {
    for (const vol of contents.volumes) total += volumeShare(project, vol);
  }
  return total;
}

/** The aggregate limits the project sets (in a stable order, so the first refusal named is always the same). */
export const setAggregates = (config: ProjectConfig): AggregateLimit[] => AGGREGATE_LIMITS.filter((k) => config[k]);

/** Refuse `after` (the project's contents once the change is made) when it goes past an aggregate limit. */
export function checkAggregates(project: string, config: ProjectConfig, after: ProjectContents, change: string): void {
  for (const key of setAggregates(config)) {
    const max = limitValue(key, config[key]!);
    const total = aggregateTotal(project, after, key);
    if (total > max) {
      throw new ApiError(400, `${change} would exceed ${key} of project "${project}": the total would be ${showAmount(key, total)} of the ${config[key]} allowed`);
    }
  }
}

/** Refuse one more instance of `type` when a count limit is already reached. */
export function checkCounts(project: string, config: ProjectConfig, before: InstanceEntry[], type: InstanceType, change: string): void {
  for (const key of Object.keys(COUNT_LIMITS)) {
    if (!config[key]) continue;
    const wanted = COUNT_LIMITS[key];
    if (wanted !== undefined && wanted !== type) continue;
    const max = parseCount(config[key]!);
    const current = countOf(before, key);
    if (current + 1 > max) {
      const what = wanted === undefined ? 'instances' : wanted === 'container' ? 'containers' : 'virtual machines';
      throw new ApiError(400, `${change} would exceed ${key} of project "${project}": it already has ${current} ${what} of the ${max} allowed`);
    }
  }
}
