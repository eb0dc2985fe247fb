/** IP address syntax for NIC options (net.isIP does the parsing). */
import { isIP } from 'node:net';

export function checkIpv4(value: string): void {
  if (isIP(value) !== 4) throw new Error(`invalid IPv4 address "${value}"`);
}

export function checkIpv6(value: string): void {
  if (isIP(value) !== 6) throw new Error(`invalid IPv6 address "${value}"`);
}

/** A comma separated list of addresses of one family. */
export function addressList(value: string | undefined): string[] {
  return (value ?? '').split(',').map((s) => s.trim()).filter(Boolean);
}

/** A comma separated list of CIDR routes of one family. */
export function checkRoutes(value: string, family: 4 | 6): void {
  for (const r of addressList(value)) {
    const [addr, len, extra] = r.split('/');
    const max = family === 4 ? 32 : 128;
    if (extra !== undefined || isIP(addr ?? '') !== family || (len !== undefined && !(/^\d+$/.test(len) && Number(len) <= max))) {
      throw new Error(`invalid IPv${family} route "${r}"`);
    }
  }
}

/** Bit rates of `limits.*`: a number and an optional unit (bit, kbit, Mbit, Gbit, Tbit). */
export function checkBitRate(value: string): void {
  if (!/^\d+(\.\d+)?(bit|kbit|Mbit|Gbit|Tbit)?$/.test(value)) throw new Error(`invalid bit rate "${value}" (e.g. 10Mbit)`);
}

/** tc takes the same units, but spells kilo with a lower-case k only: normalise to bits per second. */
export function bitsPerSecond(value: string): number {
  const m = /^(\d+(?:\.\d+)?)(bit|kbit|Mbit|Gbit|Tbit)?$/.exec(value)!;
  const scale: Record<string, number> = { bit: 1, kbit: 1e3, Mbit: 1e6, Gbit: 1e9, Tbit: 1e12 };
  return Math.round(Number(m[1]) * scale[m[2] ?? 'bit']!);
}
