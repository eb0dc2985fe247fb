/** Byte sizes as config values write them: `10GiB`, `500MB`, `4096` (bytes). */

const UNITS: Record<string, number> = {
  '': 1, B: 1,
  kB: 1e3, KB: 1e3, MB: 1e6, GB: 1e9, TB: 1e12, PB: 1e15, EB: 1e18,
  KiB: 2 ** 10, MiB: 2 ** 20, GiB: 2 ** 30, TiB: 2 ** 40, PiB: 2 ** 50, EiB: 2 ** 60,
};

/** Bytes of a size value; throws an Error naming the value when it is not one. */
export function parseSize(value: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*([A-Za-z]*)$/.exec(value.trim());
  if (!m || !(m[2]! in UNITS)) throw new Error(`Invalid size "${value}" (use bytes or a unit such as 10GiB or 500MB)`);
  return Math.floor(Number(m[1]) * UNITS[m[2]!]!);
}
