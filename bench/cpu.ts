/**
 * CPU time spent by processes between two moments, from /proc: a process's own (user + system)
 * and that of the children it has waited for (rsync, socat, a client the bench ran). On a shared,
 * loaded machine wall time swings run to run; CPU time says where the work goes.
 */
import { readFileSync } from 'node:fs';

const TICKS_PER_SECOND = 100;

export interface CpuTime {
  /** The process itself, in ms. */
  self: number;
  /** Its children that ended and were waited for, in ms. */
  children: number;
}

function cpuOf(pid: number | 'self'): CpuTime {
  // The command name may hold spaces: the fields start after its closing parenthesis.
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  const ms = (i: number) => (Number(fields[i]) * 1000) / TICKS_PER_SECOND;
  // utime, stime, cutime, cstime are fields 14-17 of stat, 12-15 once pid and comm are cut off.
  return { self: ms(11) + ms(12), children: ms(13) + ms(14) };
}

/** Named processes' CPU time from now until `stop()`. */
export class CpuMeter {
  private readonly start: Map<string, CpuTime>;

  constructor(private readonly pids: Record<string, number | 'self'>) {
    this.start = new Map(Object.entries(pids).map(([name, pid]) => [name, cpuOf(pid)]));
  }

  stop(): Record<string, CpuTime> {
    return Object.fromEntries(Object.entries(this.pids).map(([name, pid]) => {
      const now = cpuOf(pid);
      const then = this.start.get(name)!;
      return [name, { self: now.self - then.self, children: now.children - then.children }];
    }));
  }
}

/** Runs `fn`; when `into` is given, adds to it the CPU time each of `pids` spent meanwhile. */
export async function metered<T>(pids: Record<string, number | 'self'>, fn: () => Promise<T> | T, into?: Record<string, CpuTime>[]): Promise<T> {
  const meter = new CpuMeter(pids);
  const result = await fn();
  into?.push(meter.stop());
  return result;
}

/** Medians of each process's figures over runs. */
export function medianCpu(runs: Record<string, CpuTime>[], median: (xs: number[]) => number): Record<string, CpuTime> {
  const names = Object.keys(runs[0] ?? {});
  return Object.fromEntries(names.map((n) => [n, {
    self: median(runs.map((r) => r[n]!.self)),
    children: median(runs.map((r) => r[n]!.children)),
  }]));
}
