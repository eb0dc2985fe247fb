/**
 * Proxy device addresses: `tcp:<addr>:<ports>`, `udp:<addr>:<ports>`, `unix:<path>` and
 * `unix:@<abstract name>`. Ports are a comma separated list of ports and ranges (`80,8000-8010`).
 * Shared by the device type (validation) and the forwarder process.
 */
import { isIP } from 'node:net';

export type Protocol = 'tcp' | 'udp' | 'unix';

export interface ProxyAddress {
  protocol: Protocol;
  /** tcp/udp: the address (without brackets). */
  host: string;
  /** tcp/udp: every port, ranges expanded, in order. */
  ports: number[];
  /** unix: the path, or the abstract name without its `@`. */
  path: string;
  abstract: boolean;
}

const MAX_PORTS = 65536;

function parsePorts(text: string, what: string): number[] {
  const ports: number[] = [];
  for (const part of text.split(',')) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (!m) throw new Error(`invalid port "${part}" in ${what}`);
    const lo = Number(m[1]);
    const hi = m[2] === undefined ? lo : Number(m[2]);
    if (lo < 1 || hi > 65535 || hi < lo) throw new Error(`invalid port range "${part}" in ${what}`);
    for (let p = lo; p <= hi; p++) ports.push(p);
    if (ports.length > MAX_PORTS) throw new Error(`too many ports in ${what}`);
  }
  return ports;
}

export function parseProxyAddress(value: string, what: string): ProxyAddress {
  const colon = value.indexOf(':');
  const protocol = value.slice(0, colon);
  const rest = value.slice(colon + 1);
  if (colon < 0 || !['tcp', 'udp', 'unix'].includes(protocol)) throw new Error(`${what} "${value}" must start with tcp:, udp: or unix:`);
  if (protocol === 'unix') {
    if (rest === '' || rest === '@') throw new Error(`${what} "${value}" has no socket path`);
    if (/\0/.test(rest)) throw new Error(`${what} "${value}" is not a valid socket path`);
    const abstract = rest.startsWith('@');
    if (!abstract && !rest.startsWith('/')) throw new Error(`${what} "${value}" must be an absolute path or @name`);
    // sun_path holds 108 bytes with the terminating NUL (abstract names have a leading NUL instead).
    if (Buffer.byteLength(rest) > 107) throw new Error(`${what} "${value}" is longer than a socket path may be`);
    return { protocol: 'unix', host: '', ports: [], path: abstract ? rest.slice(1) : rest, abstract };
  }
  let host: string;
  let ports: string;
  if (rest.startsWith('[')) {
    const end = rest.indexOf(']');
    if (end < 0 || rest[end + 1] !== ':') throw new Error(`${what} "${value}" has an unterminated IPv6 address`);
    host = rest.slice(1, end);
    ports = rest.slice(end + 2);
    if (isIP(host) !== 6) throw new Error(`${what} "${value}": "${host}" is not an IPv6 address`);
  } else {
    const last = rest.lastIndexOf(':');
    if (last < 0) throw new Error(`${what} "${value}" has no port`);
    host = rest.slice(0, last);
    ports = rest.slice(last + 1);
    if (isIP(host) !== 4) throw new Error(`${what} "${value}": "${host}" is not an IPv4 address (IPv6 goes in brackets)`);
  }
  return { protocol: protocol as Protocol, host, ports: parsePorts(ports, `${what} "${value}"`), path: '', abstract: false };
}

/** The connect port for the i-th listen port: one port for all, or one for each. */
export function connectPort(connect: ProxyAddress, index: number): number {
  return connect.ports.length === 1 ? connect.ports[0]! : connect.ports[index]!;
}
