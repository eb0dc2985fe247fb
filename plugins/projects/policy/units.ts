/** Quantities the project limits compare: byte sizes and plain counts, parsed the same way everywhere. */
import { parseSize } from '../../../sdk/index.js';

/** Bytes of an absolute size (`512MB`, `2GiB`, `1000`); throws on anything else, percentages included. */
export const parseBytes = (value: string): number => parseSize(value);

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
