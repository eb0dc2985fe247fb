/** The wire form of instances and their state (recursion 1 and 2). */
import { InstanceStatusCodes, type InstanceStatus, type RuntimeState, type StorageService } from '../../sdk/index.js';
import type { InstanceHandle } from './access.js';
import type { InstanceManager } from './manager.js';

export function editableView(handle: InstanceHandle) {
  const r = handle.record;
  return { architecture: r.architecture, config: r.config, devices: r.devices, ephemeral: r.ephemeral, profiles: r.profiles, description: r.description };
}

export function instanceView(handle: InstanceHandle, status: InstanceStatus) {
  const r = handle.record;
  return {
    architecture: r.architecture,
    config: r.config,
    devices: r.devices,
    ephemeral: r.ephemeral,
    profiles: r.profiles,
    stateful: r.stateful,
    description: r.description,
    created_at: r.created_at,
    expanded_config: handle.inst.config,
    expanded_devices: handle.inst.devices,
    name: r.name,
    status,
    status_code: InstanceStatusCodes[status],
    last_used_at: r.last_used_at,
    location: handle.location,
    type: r.type,
    project: handle.project,
  };
}

const STOPPED_STATE: Omit<RuntimeState, 'status'> = {
  pid: 0,
  processes: 0,
  cpu: { usage: 0 },
  memory: { usage: 0, usage_peak: 0, swap_usage: 0, swap_usage_peak: 0 },
  network: null,
};

export async function stateView(handle: InstanceHandle, storage: StorageService) {
  // state() tells the status itself (a stopped instance costs it one check): asking status() first
  // would look up a running container's monitor and freezer twice (recursion=2 over 1,000 running).
  const runtime = await handle.driver.state(handle.inst);
  const usage = await storage.volumeUsage(handle.record.pool, { type: handle.record.type, project: handle.project, name: handle.name }).catch(() => undefined);
  return {
    status: runtime.status,
    status_code: InstanceStatusCodes[runtime.status],
    disk: usage === undefined ? {} : { root: { usage, total: 0 } },
    memory: runtime.memory,
    network: runtime.network,
    pid: runtime.pid,
    processes: runtime.processes,
    cpu: runtime.cpu,
  };
}

/** Children read for a whole listing at once (collection GET with recursion=2). */
export interface PrefetchedChildren {
  snapshots?: Map<string, unknown[]>;
  backups?: Map<string, unknown[]>;
}

export async function prefetchChildren(manager: InstanceManager, project: string | undefined): Promise<PrefetchedChildren> {
  const [snapshots, backups] = await Promise.all([manager.children.snapshots?.all(project), manager.children.backups?.all(project)]);
  return { snapshots, backups };
}

/** The state of an instance whose member could not tell it (offline, or no answer in time). */
export const UNREACHABLE_STATE = { ...STOPPED_STATE, status: 'Error' as const, status_code: InstanceStatusCodes.Error, disk: {} };

/**
 * recursion=2: the instance with its live state, snapshots and backups. `state`: the live state as the
 * member holding the instance told it (cluster listings); read here otherwise.
 */
export async function fullView(handle: InstanceHandle, manager: InstanceManager, prefetched?: PrefetchedChildren, state?: Awaited<ReturnType<typeof stateView>> | typeof UNREACHABLE_STATE) {
  const key = `${handle.project}/${handle.name}`;
  const [liveState, snapshots, backups] = await Promise.all([
    state ?? stateView(handle, manager.deps.storage),
    prefetched ? prefetched.snapshots?.get(key) : manager.children.snapshots?.of(handle),
    prefetched ? prefetched.backups?.get(key) : manager.children.backups?.of(handle),
  ]);
  // The reference shows null, not an empty list, when there are none.
  const listOrNull = (list: unknown[] | undefined) => (list && list.length ? list : null);
  return { ...instanceView(handle, liveState.status), state: liveState, snapshots: listOrNull(snapshots), backups: listOrNull(backups) };
}
