/** GET .../state for a container: counters from its cgroup, interfaces from its network namespace. */
import type { InstanceStatus, NetworkState, RuntimeState } from '../../sdk/index.js';
import type { ContainerCgroup } from './cgroups.js';
import type { RunningContainer } from './monitor.js';
import { readNetwork } from './network-state.js';

export function stoppedState(): RuntimeState {
  return {
    status: 'Stopped',
    pid: 0,
    processes: 0,
    cpu: { usage: 0 },
    memory: { usage: 0, usage_peak: 0, swap_usage: 0, swap_usage_peak: 0 },
    network: null,
  };
}

/** CPU time in nanoseconds: cpuacct.usage (v1) or usage_usec of cpu.stat (v2). */
function cpuUsage(cg: ContainerCgroup): number {
  const v1 = cg.file('cpuacct', 'cpuacct.usage', 'cpu.stat');
  if (v1?.version === 1) return cg.number('cpuacct', 'cpuacct.usage', 'cpu.stat') ?? 0;
  const stat = cg.read('cgroup', 'cpu.stat', 'cpu.stat') ?? '';
  return Number(/^usage_usec (\d+)/m.exec(stat)?.[1] ?? 0) * 1000;
}

function memory(cg: ContainerCgroup): RuntimeState['memory'] {
  const where = cg.file('memory', 'memory.usage_in_bytes', 'memory.current');
  if (where?.version === 1) {
    const usage = cg.number('memory', 'memory.usage_in_bytes', '') ?? 0;
    const peak = cg.number('memory', 'memory.max_usage_in_bytes', '') ?? 0;
    // memsw counts memory plus swap (present only with swap accounting).
    const memsw = cg.number('memory', 'memory.memsw.usage_in_bytes', '');
    const memswPeak = cg.number('memory', 'memory.memsw.max_usage_in_bytes', '');
    return {
      usage,
      usage_peak: peak,
      swap_usage: memsw !== undefined ? Math.max(0, memsw - usage) : 0,
      swap_usage_peak: memswPeak !== undefined ? Math.max(0, memswPeak - peak) : 0,
    };
  }
  return {
    usage: cg.number('memory', '', 'memory.current') ?? 0,
    usage_peak: cg.number('memory', '', 'memory.peak') ?? 0,
    swap_usage: cg.number('memory', '', 'memory.swap.current') ?? 0,
    swap_usage_peak: cg.number('memory', '', 'memory.swap.peak') ?? 0,
  };
}

/** What a running container's state reads of its cgroup (its files are read ahead: live-state.ts). */
export function cgroupCounters(cg: ContainerCgroup): Pick<RuntimeState, 'processes' | 'cpu' | 'memory'> {
  return { processes: cg.number('pids', 'pids.current', 'pids.current') ?? 0, cpu: { usage: cpuUsage(cg) }, memory: memory(cg) };
}

/** The cgroup files a running container's state reads (its freezer, then its counters), without reading them. */
export function stateFiles(cg: ContainerCgroup): string[] {
  return cg.filesRead((view) => {
    view.frozen();
    cgroupCounters(view);
  });
}

/**
 * `cgroup`: the container's, or a view of it whose files were read already; `network`: the interfaces
 * as the live-state helper told them, read from /proc here when absent.
 */
export function runningState(
  running: RunningContainer, status: InstanceStatus, owners?: Map<string, string>, network?: Record<string, NetworkState>, cgroup = running.cgroup,
): RuntimeState {
  if (running.initPid === undefined || !cgroup) return { ...stoppedState(), status };
  return { status, pid: running.initPid, ...cgroupCounters(cgroup), network: network ?? readNetwork(running.initPid, owners) };
}
