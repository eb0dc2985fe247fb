/**
 * The PROXY protocol (HAProxy, v1 text and v2 binary) on connections from trusted proxies
 * (`core.https_trusted_proxy`): the header in front of the TLS handshake names the real client,
 * whose address then stands for the connection (requestor address, logs).
 */
import { isIP, type Server, type Socket } from 'node:net';

const V2_SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
const V1_MAX = 107;
/** A proxy that connects and says nothing for this long is dropped. */
const HEADER_TIMEOUT_MS = 10_000;

export type ProxyHeader =
  | { status: 'incomplete' }
  | { status: 'invalid'; reason: string }
  /** `source` is absent for LOCAL/UNKNOWN headers (health checks): the connection keeps its own address. */
  | { status: 'ok'; length: number; source?: string };

/** Parse a PROXY header at the start of `buf`. */
export function parseProxyHeader(buf: Buffer): ProxyHeader {
  if (buf.length === 0) return { status: 'incomplete' };
  if (buf[0] === 0x0d) return parseV2(buf);
  if (buf[0] === 0x50) return parseV1(buf);
  return { status: 'invalid', reason: 'no PROXY header' };
}

function parseV1(buf: Buffer): ProxyHeader {
  const prefix = 'PROXY ';
  const head = buf.subarray(0, Math.min(buf.length, prefix.length)).toString('latin1');
  if (!prefix.startsWith(head)) return { status: 'invalid', reason: 'no PROXY header' };
  const end = buf.indexOf('\r\n');
  if (end < 0) return buf.length >= V1_MAX ? { status: 'invalid', reason: 'PROXY v1 header too long' } : { status: 'incomplete' };
  if (end + 2 > V1_MAX) return { status: 'invalid', reason: 'PROXY v1 header too long' };
  const parts = buf.subarray(0, end).toString('latin1').split(' ');
  const length = end + 2;
  if (parts[1] === 'UNKNOWN') return { status: 'ok', length };
  if (parts.length !== 6 || (parts[1] !== 'TCP4' && parts[1] !== 'TCP6')) return { status: 'invalid', reason: 'malformed PROXY v1 header' };
  const [, family, src, , sport] = parts as [string, string, string, string, string, string];
  if (isIP(src) !== (family === 'TCP4' ? 4 : 6) || !/^\d{1,5}$/.test(sport) || Number(sport) > 65535) {
    return { status: 'invalid', reason: 'malformed PROXY v1 address' };
  }
  return { status: 'ok', length, source: joinAddress(src, Number(sport)) };
}

function parseV2(buf: Buffer): ProxyHeader {
  const sig = buf.subarray(0, Math.min(buf.length, V2_SIGNATURE.length));
  if (!V2_SIGNATURE.subarray(0, sig.length).equals(sig)) return { status: 'invalid', reason: 'no PROXY header' };
  if (buf.length < 16) return { status: 'incomplete' };
  const versionCommand = buf[12]!;
  if (versionCommand >> 4 !== 2) return { status: 'invalid', reason: 'unsupported PROXY version' };
  const length = 16 + buf.readUInt16BE(14);
  if (buf.length < length) return { status: 'incomplete' };
  const command = versionCommand & 0x0f;
  if (command === 0) return { status: 'ok', length }; // LOCAL
  if (command !== 1) return { status: 'invalid', reason: 'unsupported PROXY command' };
  const family = buf[13]! >> 4;
  const body = buf.subarray(16, length);
  if (family === 1 && body.length >= 12) {
    return { status: 'ok', length, source: joinAddress([...body.subarray(0, 4)].join('.'), body.readUInt16BE(8)) };
  }
  if (family === 2 && body.length >= 36) {
    const groups = [];
    for (let i = 0; i < 16; i += 2) groups.push(body.readUInt16BE(i).toString(16));
    return { status: 'ok', length, source: joinAddress(groups.join(':'), body.readUInt16BE(32)) };
  }
  return { status: 'ok', length }; // AF_UNSPEC or AF_UNIX: nothing to rewrite
}

function joinAddress(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** Where the rewritten source of a connection is kept (on the raw TCP socket). */
const PROXIED = Symbol('corral.proxied-source');

export function proxiedSource(socket: object): string | undefined {
  return (socket as { [PROXIED]?: string })[PROXIED];
}

/** Strip `::ffff:` from IPv4-mapped addresses so both spellings match the configured list. */
export function plainAddress(address: string | undefined): string {
  return (address ?? '').replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '');
}

/**
 * Put the PROXY header reader in front of `server`'s own connection handling (TLS). Connections
 * from other sources go straight through, untouched.
 */
export function acceptProxyHeaders(server: Server, trusted: () => ReadonlySet<string>, onInvalid: (from: string, reason: string) => void): void {
  const handlers = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeAllListeners('connection');
  const pass = (socket: Socket) => {
    for (const handler of handlers) handler.call(server, socket);
  };
  server.on('connection', (socket: Socket) => {
    const from = plainAddress(socket.remoteAddress);
    if (!trusted().has(from)) return pass(socket);
    let buffered = Buffer.alloc(0);
    const timer = setTimeout(() => socket.destroy(), HEADER_TIMEOUT_MS);
    const onError = () => socket.destroy();
    socket.on('error', onError);
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      const header = parseProxyHeader(buffered);
      if (header.status === 'incomplete') return;
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('error', onError);
      socket.pause();
      if (header.status === 'invalid') {
        onInvalid(from, header.reason);
        return void socket.destroy();
      }
      if (header.source) (socket as unknown as { [PROXIED]?: string })[PROXIED] = header.source;
      // TLS reads what is left from the socket's buffer before its own reads.
      const rest = buffered.subarray(header.length);
      if (rest.length) socket.unshift(rest);
      pass(socket);
    };
    socket.on('data', onData);
    socket.once('close', () => clearTimeout(timer));
  });
}
