/**
 * A realtime budget for containers whose sched_setscheduler is intercepted. On a kernel with
 * realtime group scheduling (cgroup v1 `cpu.rt_runtime_us`, as here) a cgroup with no budget (the
 * default, 0) can hold no realtime task at all: the policy the proxy sets for the container would
 * be refused (EPERM) whoever asks. The container gets a small share of each period; the sum of all
 * shares must stay under the host's, so it is kept small.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { CgroupHost } from './cgroups.js';
import type { CgroupLimit } from './limits.js';

/** Microseconds of realtime run time per period (1 s by default): 5 %. */
export const REALTIME_BUDGET_US = 50_000;

export function realtimeBudget(config: Record<string, string>, cgroups: CgroupHost): CgroupLimit[] {
  const on = ['true', '1', 'yes', 'on'].includes((config['security.syscalls.intercept.sched_setscheduler'] ?? '').toLowerCase());
  const cpu = cgroups.v1.get('cpu');
  if (!on || !cpu || !existsSync(path.join(cpu, 'cpu.rt_runtime_us'))) return [];
  return [{ key: 'security.syscalls.intercept.sched_setscheduler', controller: 'cpu', v1: 'cpu.rt_runtime_us', v2: 'cpu.rt_runtime_us', value: String(REALTIME_BUDGET_US) }];
}
