/** IP addresses, subnets and ranges as ACL rules and forwards write them, parsed without the host. */
import { isIP } from 'node:net';

export type Family = 4 | 6;

export interface Ip {
  family: Family;
  value: bigint;
}

function v6Value(text: string): bigint | undefined {
  let s = text;
  // An embedded IPv4 tail (::ffff:1.2.3.4) becomes two groups.
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (v4) {
    const parts = v4[1]!.split('.').map(Number);
    s = `${s.slice(0, -v4[1]!.length)}${((parts[0]! << 8) | parts[1]!).toString(16)}:${((parts[2]! << 8) | parts[3]!).toString(16)}`;
  }
  const halves = s.split('::');
  if (halves.length > 2) return undefined;
  const head = halves[0] ? halves[0].split(':') : [];
  const tail = halves.length === 2 && halves[1] ? halves[1].split(':') : [];
  const fill = halves.length === 2 ? 8 - head.length - tail.length : 0;
  const groups = [...head, ...Array(fill).fill('0'), ...tail];
  if (groups.length !== 8) return undefined;
  return groups.reduce((acc, g) => (acc << 16n) | BigInt(Number.parseInt(g, 16)), 0n);
}

export function parseIp(text: string): Ip | undefined {
  const family = isIP(text);
  if (family === 4) return { family: 4, value: text.split('.').reduce((acc, p) => (acc << 8n) | BigInt(Number(p)), 0n) };
  if (family === 6) {
    const value = v6Value(text);
    return value === undefined ? undefined : { family: 6, value };
  }
  return undefined;
}

/** `a.b.c.d/n` or `x::/n` with a prefix that fits the family; the address need not be the subnet's first. */
export function parseCidr(text: string): (Ip & { prefix: number }) | undefined {
  const slash = text.indexOf('/');
  if (slash < 0) return undefined;
  const ip = parseIp(text.slice(0, slash));
  const prefixText = text.slice(slash + 1);
  if (!ip || !/^\d{1,3}$/.test(prefixText)) return undefined;
  const prefix = Number(prefixText);
  if (prefix > (ip.family === 4 ? 32 : 128)) return undefined;
  return { ...ip, prefix };
}

/** `first-last` of one family, first not after last. */
export function parseRange(text: string): { family: Family; first: Ip; last: Ip } | undefined {
  const parts = text.split('-');
  if (parts.length !== 2) return undefined;
  const first = parseIp(parts[0]!);
  const last = parseIp(parts[1]!);
  if (!first || !last || first.family !== last.family || first.value > last.value) return undefined;
  return { family: first.family, first, last };
}
