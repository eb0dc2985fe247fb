/** Quantities the project limits compare: byte sizes and plain counts, parsed the same way everywhere. */

const UNITS: Record<string, number> = {
  '': 1, B: 1,
  kB: 1e3, KB: 1e3, MB: 1e6, GB: 1e9, TB: 1e12, PB: 1e15, EB: 1e18,
  KiB: 2 ** 10, MiB: 2 ** 20, GiB: 2 ** 30, TiB: 2 ** 40, PiB: 2 ** 50, EiB: 2 ** 60,
};

/** Bytes of an absolute size (`512MB`, `2GiB`, `1000`); throws on anything else, percentages included. */
export function parseBytes(value: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*([A-Za-z]*)$/.exec(value.trim());
  if (!m || !(m[2]! in UNITS)) throw new Error(`"${value}" is not a size (a number with an optional unit such as MB or GiB)`);
  return Math.floor(Number(m[1]) * UNITS[m[2]!]!);
}

/** A non-negative whole number that fits in 32 bits, as the project counters are. */
export function parseCount(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) > 0xffffffff) throw new Error(`"${value}" is not a whole number between 0 and 4294967295`);
  return Number(value);
}

/** Bytes shown the way people read them (binary units, two decimals at most). */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
  let value = bytes;
  let i = 0;
  while (value >= 1024 && i < units.length - 1) {
    value /= 1024;
    i++;
  }
  return `${Number(value.toFixed(2))}${units[i]}`;
}
