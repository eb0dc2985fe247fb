/**
 * What a project currently holds, counted the way project limits count it: instances by type, and
 * the sum of what instances are configured to use (`limits.cpu`, `limits.memory`, `limits.processes`,
 * root disk `size`), plus custom volumes' `size` (images count nothing, decision 0008), for `/1.0/projects/<name>/state`. Unlike the policy gate
 * (policy/limits.ts), values that cannot be summed count as nothing here instead of being refused.
 */
import { totalmem } from 'node:os';
import {
  CustomVolumesServiceRef, featureProjectOf, InstancesServiceRef, parseCpuSet, parseSize, ProjectsServiceRef,
  type DeviceConfig, type InstanceType, type ServiceRegistry,
} from '../../sdk/index.js';
import { rootDisk } from './policy/contents.js';

export const ALLOCATION_KINDS = ['containers', 'virtual-machines', 'instances', 'cpu', 'memory', 'processes', 'disk', 'networks'] as const;
export type AllocationKind = (typeof ALLOCATION_KINDS)[number];
export type Allocations = Record<AllocationKind, number>;

/** The project config key limiting each kind. */
export const LIMIT_KEY: Record<AllocationKind, string> = {
  containers: 'limits.containers',
  'virtual-machines': 'limits.virtual-machines',
  instances: 'limits.instances',
  cpu: 'limits.cpu',
  memory: 'limits.memory',
  processes: 'limits.processes',
  disk: 'limits.disk',
  networks: 'limits.networks',
};

/** An instance as the usage counts it: expanded config and devices. */
export interface CountedInstance {
  name: string;
  type: InstanceType;
  config: Record<string, string>;
  devices: Record<string, DeviceConfig>;
}

export const emptyAllocations = (): Allocations => ({
  containers: 0, 'virtual-machines': 0, instances: 0, cpu: 0, memory: 0, processes: 0, disk: 0, networks: 0,
});

/** CPUs named by `limits.cpu`: a count (`2`) or a set of host CPUs (`0-3,6`, each CPU once however the ranges overlap). */
export function cpuCount(value: string | undefined): number {
  if (!value) return 0;
  if (/^\d+$/.test(value)) return Number(value);
  try {
    return parseCpuSet(value).length;
  } catch {
    return 0;
  }
}

/** Bytes of `limits.memory` (a size or a percentage of the host's memory); 0 when unset or unreadable. */
export function memoryBytes(value: string | undefined): number {
  if (!value) return 0;
  const pct = /^(\d+(?:\.\d+)?)%$/.exec(value);
  if (pct) return Math.floor((totalmem() * Number(pct[1])) / 100);
  try {
    return parseSize(value);
  } catch {
    return 0;
  }
}

/** Bytes of a `size` value; 0 when unset or unreadable. */
function sizeBytes(value: string | undefined): number {
  if (!value) return 0;
  try {
    return parseSize(value);
  } catch {
    return 0;
  }
}

/** Bytes of the root disk's `size`; 0 when it has none. */
export function rootDiskBytes(devices: Record<string, DeviceConfig>): number {
  return sizeBytes(rootDisk(devices)?.size);
}

/** What one instance adds to its project's allocations. */
export function instanceAllocations(inst: CountedInstance): Allocations {
  const out = emptyAllocations();
  out.instances = 1;
  if (inst.type === 'virtual-machine') out['virtual-machines'] = 1;
  else out.containers = 1;
  out.cpu = cpuCount(inst.config['limits.cpu']);
  out.memory = memoryBytes(inst.config['limits.memory']);
  const processes = inst.config['limits.processes'];
  out.processes = processes && /^\d+$/.test(processes) ? Number(processes) : 0;
  out.disk = rootDiskBytes(inst.devices);
  return out;
}

export function addAllocations(into: Allocations, more: Allocations): Allocations {
  for (const kind of ALLOCATION_KINDS) into[kind] += more[kind];
  return into;
}

/** The instances of a project as the usage counts them (expanded config and devices). */
export async function countedInstances(services: ServiceRegistry, project: string): Promise<CountedInstance[]> {
  const instances = services.get(InstancesServiceRef);
  if (!instances) return [];
  return (await instances.list(project)).map((i) => ({ name: i.name, type: i.type, config: i.expandedConfig, devices: i.expandedDevices }));
}

/**
 * Current allocations of `project`. `except` leaves one instance out (the one a change replaces, so
 * that the caller can add its proposed form instead).
 */
export async function projectAllocations(services: ServiceRegistry, project: string, opts: { except?: string } = {}): Promise<Allocations> {
  const total = emptyAllocations();
  for (const inst of await countedInstances(services, project)) {
    if (inst.name !== opts.except) addAllocations(total, instanceAllocations(inst));
  }
  // Custom volumes by their `size` (one without a size counts nothing here; the gate refuses it under limits.disk).
  const volumes = services.get(CustomVolumesServiceRef);
  if (volumes && (await featureProjectOf(services, project, 'storage.volumes')) === project) {
    for (const v of volumes.list(project)) total.disk += sizeBytes(v.config.size);
  }
  const contents = await services.get(ProjectsServiceRef)?.contents.collect(project, project);
  total.networks = (contents ?? []).filter((url) => url.startsWith('/1.0/networks/')).length;
  return total;
}
