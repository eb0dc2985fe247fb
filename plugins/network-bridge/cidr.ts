/** IPv4 and IPv6 addresses and subnets as big integers: parsing, containment and overlap. */
import { isIPv4, isIPv6 } from 'node:net';

export type Family = 4 | 6;

export interface Cidr {
  family: Family;
  /** The address as written (host bits kept). */
  address: bigint;
  prefix: number;
}

const bits = (family: Family) => (family === 4 ? 32 : 128);

export function parseIp(text: string): { family: Family; value: bigint } | undefined {
  if (isIPv4(text)) return { family: 4, value: text.split('.').reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n) };
  if (!isIPv6(text)) return undefined;
  if (text.split('::').length > 2) return undefined;
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const expand = (part: string | undefined): string[] => {
    if (!part) return [];
    const groups = part.split(':');
    const last = groups[groups.length - 1]!;
    if (last.includes('.')) {
      // An embedded IPv4 tail (::ffff:1.2.3.4) is two groups.
      const v4 = parseIp(last)!.value;
      groups.splice(groups.length - 1, 1, (v4 >> 16n).toString(16), (v4 & 0xffffn).toString(16));
    }
    return groups;
  };
  const h = expand(head);
  const t = expand(tail);
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  return { family: 6, value: groups.reduce((acc, g) => (acc << 16n) | BigInt(Number.parseInt(g || '0', 16)), 0n) };
}

export function formatIp(family: Family, value: bigint): string {
  if (family === 4) return [24n, 16n, 8n, 0n].map((s) => String((value >> s) & 255n)).join('.');
  const groups = Array.from({ length: 8 }, (_, i) => ((value >> BigInt((7 - i) * 16)) & 0xffffn).toString(16));
  // Collapse the longest run of zero groups (at least two) into "::".
  let best = { start: -1, len: 0 };
  for (let i = 0; i < 8;) {
    if (groups[i] !== '0') { i++; continue; }
    let j = i;
    while (j < 8 && groups[j] === '0') j++;
    if (j - i > best.len && j - i > 1) best = { start: i, len: j - i };
    i = j;
  }
  if (best.start < 0) return groups.join(':');
  return `${groups.slice(0, best.start).join(':')}::${groups.slice(best.start + best.len).join(':')}`;
}

export function parseCidr(text: string): Cidr | undefined {
  const [addr, prefixText, extra] = text.split('/');
  if (extra !== undefined || addr === undefined || prefixText === undefined || !/^\d{1,3}$/.test(prefixText)) return undefined;
  const ip = parseIp(addr);
  if (!ip) return undefined;
  const prefix = Number(prefixText);
  if (prefix > bits(ip.family)) return undefined;
  return { family: ip.family, address: ip.value, prefix };
}

const mask = (family: Family, prefix: number): bigint => {
  const total = bits(family);
  return prefix === 0 ? 0n : ((1n << BigInt(prefix)) - 1n) << BigInt(total - prefix);
};

export const networkOf = (c: Cidr): bigint => c.address & mask(c.family, c.prefix);
export const lastOf = (c: Cidr): bigint => networkOf(c) | (~mask(c.family, c.prefix) & ((1n << BigInt(bits(c.family))) - 1n));

export function contains(c: Cidr, family: Family, value: bigint): boolean {
  return c.family === family && value >= networkOf(c) && value <= lastOf(c);
}

export function overlaps(a: Cidr, b: Cidr): boolean {
  return a.family === b.family && networkOf(a) <= lastOf(b) && networkOf(b) <= lastOf(a);
}

export const cidrText = (c: Cidr): string => `${formatIp(c.family, c.address)}/${c.prefix}`;
export const subnetText = (c: Cidr): string => `${formatIp(c.family, networkOf(c))}/${c.prefix}`;
