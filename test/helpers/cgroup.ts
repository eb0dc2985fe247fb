/** Cgroup files of a process, found from /proc independently of the driver's own code (v1 or v2). */
import { readFileSync } from 'node:fs';
import path from 'node:path';

export function cgroupFileOf(pid: number, controller: string, v1File: string, v2File: string): string {
  const mounts = readFileSync('/proc/self/mounts', 'utf8').split('\n').map((l) => l.split(' '));
  const lines = readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n').filter(Boolean);
  const v1 = lines.find((l) => l.split(':')[1]!.split(',').includes(controller));
  if (v1) {
    const mount = mounts.find((m) => m[2] === 'cgroup' && m[3]!.split(',').includes(controller))!;
    return path.join(mount[1]!, v1.split(':')[2]!.replace(/\/init\.scope$/, ''), v1File);
  }
  const unified = mounts.find((m) => m[2] === 'cgroup2')!;
  return path.join(unified[1]!, lines.find((l) => l.startsWith('0::'))!.slice(3), v2File);
}

export const memoryLimitFile = (pid: number) => cgroupFileOf(pid, 'memory', 'memory.limit_in_bytes', 'memory.max');
export const pidsMaxFile = (pid: number) => cgroupFileOf(pid, 'pids', 'pids.max', 'pids.max');
export const cpusetFile = (pid: number) => cgroupFileOf(pid, 'cpuset', 'cpuset.cpus', 'cpuset.cpus');
