/**
 * CPU sets as `limits.cpu` writes them when it pins (`0-3,6`). Ids are bounded by the largest CPU count
 * Linux can be built for (8,192), and ranges are merged before they are expanded: a value such as
 * `0-4000000000` otherwise held the daemon for minutes and ran it out of memory.
 */

/** One more than the highest CPU id any Linux kernel counts (CONFIG_NR_CPUS is at most 8192). */
export const MAX_CPUS = 8192;

const CPU_SET = /^\d+(-\d+)?(,\d+(-\d+)?)*,?$/;

/**
 * The ids of a CPU set, ascending, each once. Throws an Error naming the problem when the value is not
 * a list of ids and ranges, a range runs backwards, or an id is past what Linux counts.
 */
export function parseCpuSet(value: string): number[] {
  if (!CPU_SET.test(value)) throw new Error(`Invalid CPU set "${value}" (a list of CPU ids and ranges, such as 0-1,3)`);
  const ranges: [number, number][] = [];
  for (const part of value.split(',').filter(Boolean)) {
    const [a, b = a] = part.split('-').map(Number) as [number, number?];
    if (b! < a) throw new Error(`Invalid CPU range "${part}" (its end is before its start)`);
    if (b! >= MAX_CPUS) throw new Error(`CPU id ${b} is out of range (0 to ${MAX_CPUS - 1})`);
    ranges.push([a, b!]);
  }
  ranges.sort((x, y) => x[0] - y[0]);
  const ids: number[] = [];
  let next = 0;
  for (const [a, b] of ranges) {
    for (let id = Math.max(a, next); id <= b; id++) ids.push(id);
    next = Math.max(next, b + 1);
  }
  return ids;
}
