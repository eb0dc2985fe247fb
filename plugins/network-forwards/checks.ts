/**
 * Checks of a forward against its network: the listen address is one unicast address, every
 * target is inside the network's subnet of the same family, ports are lists and ranges of equal
 * size (or many to one), and no listen port is used twice for one protocol.
 */
import { isIP } from 'node:net';
import { badRequest, type NetworkInfo } from '../../sdk/index.js';
import type { ForwardPort } from './forward.js';

export interface Ip { family: 4 | 6; value: bigint }

export function parseIp(text: string): Ip | undefined {
  const family = isIP(text);
  if (family === 4) return { family, value: text.split('.').reduce((a, p) => (a << 8n) | BigInt(Number(p)), 0n) };
  if (family !== 6) return undefined;
  const halves = text.split('::');
  const head = halves[0] ? halves[0].split(':') : [];
  const tail = halves.length === 2 && halves[1] ? halves[1].split(':') : [];
  if (tail.some((g) => g.includes('.')) || head.some((g) => g.includes('.'))) return { family, value: -1n };
  const groups = [...head, ...Array(halves.length === 2 ? 8 - head.length - tail.length : 0).fill('0'), ...tail];
  return { family, value: groups.reduce((a, g) => (a << 16n) | BigInt(Number.parseInt(g, 16)), 0n) };
}

/** Ports of a list such as `80,1000-1002`, expanded. */
export function expandPorts(value: string, what: string): number[] {
  const out: number[] = [];
  for (const part of value.split(',').map((s) => s.trim())) {
    const m = /^(\d{1,5})(?:-(\d{1,5}))?$/.exec(part);
    const first = m ? Number(m[1]) : NaN;
    const last = m?.[2] !== undefined ? Number(m[2]) : first;
    if (!m || first < 1 || last > 65535 || last < first) throw new Error(`${what} "${part}" is not a port (1 to 65535) or a range of them`);
    for (let p = first; p <= last; p += 1) out.push(p);
  }
  return out;
}

export function checkListenAddress(text: unknown): string {
  if (typeof text !== 'string' || text === '') throw badRequest('No listen address provided');
  const ip = parseIp(text);
  if (!ip) throw badRequest(`Listen address "${text}" is not an IP address`);
  if (ip.value === 0n) throw badRequest(`Listen address "${text}" is the unspecified address`);
  const multicast = ip.family === 4 ? ip.value >> 28n === 0xen : ip.value >> 120n === 0xffn;
  if (multicast || (ip.family === 4 && ip.value === 0xffffffffn)) throw badRequest(`Listen address "${text}" is not a unicast address`);
  return text;
}

/** The subnet of a bridge network for a family, from its `ipvN.address`. */
function subnet(net: NetworkInfo, family: 4 | 6): { first: bigint; last: bigint } | undefined {
  const text = net.config[`ipv${family}.address`] ?? '';
  const slash = text.indexOf('/');
  const ip = slash > 0 ? parseIp(text.slice(0, slash)) : undefined;
  if (!ip || ip.family !== family) return undefined;
  const bits = family === 4 ? 32n : 128n;
  const host = bits - BigInt(Number(text.slice(slash + 1)));
  const first = (ip.value >> host) << host;
  return { first, last: first + (1n << host) - 1n };
}

function checkTarget(net: NetworkInfo, listen: Ip, text: string, what: string): void {
  const ip = parseIp(text);
  if (!ip) throw badRequest(`${what} "${text}" is not an IP address`);
  if (ip.family !== listen.family) throw badRequest(`${what} "${text}" is not of the listen address's IP family`);
  const s = subnet(net, ip.family);
  if (!s || ip.value < s.first || ip.value > s.last) throw badRequest(`${what} "${text}" is not inside the subnet of network "${net.name}"`);
}

export function checkConfig(net: NetworkInfo, listen: string, config: Record<string, string>): void {
  const ip = parseIp(listen)!;
  for (const [key, value] of Object.entries(config)) {
    if (key.startsWith('user.')) continue;
    if (key !== 'target_address') throw badRequest(`Unknown network forward option "${key}"`);
    if (value !== '') checkTarget(net, ip, value, 'Default target address');
  }
}

const str = (v: unknown, what: string): string => {
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') throw badRequest(`${what} must be a string`);
  return v.trim();
};

export function checkPorts(net: NetworkInfo, listen: string, raw: unknown): ForwardPort[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw badRequest('"ports" must be a list');
  const ip = parseIp(listen)!;
  const used = new Map<string, number>();
  return raw.map((p, i) => {
    const at = `in port specification ${i}`;
    if (typeof p !== 'object' || p === null || Array.isArray(p)) throw badRequest(`A port specification must be an object (${at})`);
    const port: ForwardPort = {
      description: str(p.description, 'description'),
      protocol: str(p.protocol, 'protocol'),
      listen_port: str(p.listen_port, 'listen_port'),
      target_port: str(p.target_port, 'target_port'),
      target_address: str(p.target_address, 'target_address'),
    };
    if (port.protocol !== 'tcp' && port.protocol !== 'udp') throw badRequest(`Protocol must be tcp or udp ${at}`);
    if (port.listen_port === '') throw badRequest(`No listen port ${at}`);
    if (port.target_address === '') throw badRequest(`No target address ${at}`);
    checkTarget(net, ip, port.target_address, `Target address ${at}:`);
    let listenPorts: number[];
    let targetPorts: number[] = [];
    try {
      listenPorts = expandPorts(port.listen_port, 'listen port');
      if (port.target_port !== '') targetPorts = expandPorts(port.target_port, 'target port');
    } catch (err) {
      throw badRequest(`${(err as Error).message} ${at}`);
    }
    if (targetPorts.length > 1 && targetPorts.length !== listenPorts.length) {
      throw badRequest(`${listenPorts.length} listen port(s) and ${targetPorts.length} target ports do not pair up ${at} (give as many target ports, or one)`);
    }
    for (const lp of listenPorts) {
      const k = `${port.protocol}/${lp}`;
      if (used.has(k)) throw badRequest(`Listen port ${lp}/${port.protocol} is used twice (port specifications ${used.get(k)} and ${i})`);
      used.set(k, i);
    }
    return port;
  });
}
