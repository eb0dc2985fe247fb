/**
 * A running container's network interfaces, read from the host without entering the container:
 * /proc/<init>/net/* shows the container's network namespace (counters, IPv6 addresses, IPv4
 * routes and local addresses) and the container's own sysfs gives MTU, flags and MAC address.
 */
import { lstatSync, readdirSync, readlinkSync, statfsSync } from 'node:fs';
import type { NetworkState } from '../../sdk/index.js';
import { readText } from './cgroups.js';

const SYSFS_MAGIC = 0x62656572;
export const IFF_UP = 0x1;
const IFF_BROADCAST = 0x2;
const IFF_LOOPBACK = 0x8;
const IFF_POINTOPOINT = 0x10;

type Counters = NetworkState['counters'];

/** /proc/net/dev: receive columns then transmit columns per interface. */
export function parseNetDev(text: string): Map<string, Counters> {
  const out = new Map<string, Counters>();
  for (const line of text.split('\n').slice(2)) {
    const colon = line.indexOf(':');
    if (colon < 0) continue;
    const name = line.slice(0, colon).trim();
    const f = line.slice(colon + 1).trim().split(/\s+/).map(Number);
    // Receive columns: bytes packets errs drop ...; transmit columns start at the ninth.
    out.set(name, {
      bytes_received: f[0] ?? 0, bytes_sent: f[8] ?? 0, packets_received: f[1] ?? 0, packets_sent: f[9] ?? 0,
      errors_received: f[2] ?? 0, errors_sent: f[10] ?? 0, packets_dropped_outbound: f[11] ?? 0, packets_dropped_inbound: f[3] ?? 0,
    });
  }
  return out;
}

function compressIpv6(hex: string): string {
  const groups = hex.match(/.{4}/g)!.map((g) => parseInt(g, 16).toString(16));
  let best = -1;
  let bestLen = 0;
  for (let i = 0; i < 8;) {
    if (groups[i] !== '0') { i++; continue; }
    let j = i;
    while (j < 8 && groups[j] === '0') j++;
    if (j - i > bestLen && j - i > 1) { best = i; bestLen = j - i; }
    i = j;
  }
  if (best < 0) return groups.join(':');
  return `${groups.slice(0, best).join(':')}::${groups.slice(best + bestLen).join(':')}`;
}

function ipv6Scope(scope: number): string {
  if (scope === 0x10) return 'local';
  if (scope === 0x20) return 'link';
  return 'global';
}

type Address = NetworkState['addresses'][number];

/** /proc/net/if_inet6: address, ifindex, prefix length, scope, flags, name (hex fields). */
export function parseIfInet6(text: string): Map<string, Address[]> {
  const out = new Map<string, Address[]>();
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length < 6 || f[0]!.length !== 32) continue;
    const list = out.get(f[5]!) ?? [];
    list.push({ family: 'inet6', address: compressIpv6(f[0]!), netmask: String(parseInt(f[2]!, 16)), scope: ipv6Scope(parseInt(f[3]!, 16)) });
    out.set(f[5]!, list);
  }
  return out;
}

const ipv4 = (n: number) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
const fromDotted = (s: string) => s.split('.').reduce((acc, p) => ((acc << 8) | Number(p)) >>> 0, 0);
/** /proc/net/route stores addresses as little-endian hex. */
const fromRouteHex = (h: string) => {
  const n = parseInt(h, 16);
  return (((n & 255) << 24) | (((n >>> 8) & 255) << 16) | (((n >>> 16) & 255) << 8) | (n >>> 24)) >>> 0;
};
const prefixLength = (mask: number) => mask.toString(2).replace(/0+$/, '').length;

/**
 * IPv4 addresses by interface: the local (`/32 host LOCAL`) entries of fib_trie, each given the
 * interface and prefix of the longest directly connected route that contains it.
 */
export function ipv4Addresses(fibTrie: string, routes: string, owners: Map<string, string> = new Map()): Map<string, Address[]> {
  const local = new Set<number>();
  const lines = fibTrie.split('\n');
  for (let i = 0; i + 1 < lines.length; i++) {
    const m = /\|--\s+(\d+\.\d+\.\d+\.\d+)\s*$/.exec(lines[i]!);
    if (!m) continue;
    for (let j = i + 1; j < lines.length && /^\s+\/\d+/.test(lines[j]!); j++) {
      if (/\/32 host LOCAL/.test(lines[j]!)) local.add(fromDotted(m[1]!));
    }
  }
  const connected: { iface: string; dest: number; mask: number }[] = [];
  for (const line of routes.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 8 || f[2] !== '00000000') continue;
    connected.push({ iface: f[0]!, dest: fromRouteHex(f[1]!), mask: fromRouteHex(f[7]!) });
  }
  const out = new Map<string, Address[]>();
  for (const addr of [...local].sort((a, b) => a - b)) {
    let iface: string | undefined;
    let prefix = 32;
    if (addr >>> 24 === 127) {
      iface = 'lo';
      prefix = 8;
    } else {
      const best = connected.filter((r) => ((addr & r.mask) >>> 0) === r.dest && r.mask !== 0).sort((a, b) => b.mask - a.mask)[0];
      if (best) {
        iface = best.iface;
        prefix = prefixLength(best.mask);
      } else {
        // A /32 has no connected route: its interface is known only to whoever set it (routed NICs).
        iface = owners.get(ipv4(addr));
      }
    }
    if (!iface) continue;
    const scope = addr >>> 24 === 127 ? 'local' : (addr >>> 16) === 0xa9fe ? 'link' : 'global';
    const list = out.get(iface) ?? [];
    list.push({ family: 'inet', address: ipv4(addr), netmask: String(prefix), scope });
    out.set(iface, list);
  }
  return out;
}

/**
 * The container's sysfs net class directory, if it is a real sysfs reached without symlinks: a
 * container's root could otherwise point these paths at the host's files.
 */
function sysfsNetDir(pid: number): string | undefined {
  const root = `/proc/${pid}/root`;
  try {
    for (const p of ['/sys', '/sys/class', '/sys/class/net']) {
      if (!lstatSync(root + p).isDirectory()) return undefined;
    }
    if (statfsSync(`${root}/sys/class/net`).type !== SYSFS_MAGIC) return undefined;
    return `${root}/sys/class/net`;
  } catch {
    return undefined;
  }
}

interface LinkFacts { mtu: number; flags: number; hwaddr: string }

function linkFacts(dir: string | undefined, name: string): LinkFacts | undefined {
  if (!dir || name.includes('/') || name.startsWith('.')) return undefined;
  try {
    // Kernel-made links point into the same sysfs (../../devices/...); anything else is not trusted.
    const target = readlinkSync(`${dir}/${name}`);
    if (!/^\.\.\/\.\.\/devices\/(?!.*\.\.)/.test(target)) return undefined;
  } catch {
    return undefined;
  }
  const mtu = Number(readText(`${dir}/${name}/mtu`)?.trim() ?? 0);
  const flags = parseInt(readText(`${dir}/${name}/flags`)?.trim() ?? '0', 16);
  const hwaddr = readText(`${dir}/${name}/address`)?.trim() ?? '';
  return { mtu, flags, hwaddr: /^[0:]*$/.test(hwaddr) ? '' : hwaddr };
}

export function linkType(flags: number): string {
  if (flags & IFF_LOOPBACK) return 'loopback';
  if (flags & IFF_POINTOPOINT) return 'point-to-point';
  if (flags & IFF_BROADCAST) return 'broadcast';
  return '';
}

/** IPv6 addresses in a fixed order (the kernel's own differs between /proc and netlink). */
export function sortedByText(addresses: Address[]): Address[] {
  return [...addresses].sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
}

/** `owners`: IPv4 address to interface, for addresses the driver set itself. */
export function readNetwork(pid: number, owners?: Map<string, string>): Record<string, NetworkState> {
  const counters = parseNetDev(readText(`/proc/${pid}/net/dev`) ?? '');
  const v6 = parseIfInet6(readText(`/proc/${pid}/net/if_inet6`) ?? '');
  const v4 = ipv4Addresses(readText(`/proc/${pid}/net/fib_trie`) ?? '', readText(`/proc/${pid}/net/route`) ?? '', owners);
  const sysfs = sysfsNetDir(pid);
  let listed: string[] = [];
  try {
    if (sysfs) listed = readdirSync(sysfs);
  } catch { /* counters still name the interfaces */ }
  const names = [...new Set([...counters.keys(), ...listed])].sort();
  const out: Record<string, NetworkState> = {};
  for (const name of names) {
    const facts = linkFacts(sysfs, name);
    const flags = facts?.flags ?? (name === 'lo' ? IFF_LOOPBACK : 0);
    out[name] = {
      addresses: [...(v4.get(name) ?? []), ...sortedByText(v6.get(name) ?? [])],
      counters: counters.get(name) ?? {
        bytes_received: 0, bytes_sent: 0, packets_received: 0, packets_sent: 0, errors_received: 0, errors_sent: 0, packets_dropped_outbound: 0, packets_dropped_inbound: 0,
      },
      hwaddr: facts?.hwaddr ?? '',
      host_name: '',
      mtu: facts?.mtu ?? 0,
      state: flags & IFF_UP ? 'up' : 'down',
      type: linkType(flags),
    };
  }
  return out;
}
