/**
 * The PROXY protocol (version 1, the text form) header a proxy device with `proxy_protocol=true`
 * sends first on each upstream connection, so the server inside learns the real client address.
 */
import net from 'node:net';

/** IPv4 clients of a dual-stack listener show as ::ffff:a.b.c.d: the header names them as TCP4. */
const plain = (a: string) => (a.startsWith('::ffff:') && net.isIPv4(a.slice(7)) ? a.slice(7) : a);

export function proxyHeaderV1(src?: string, srcPort?: number, dst?: string, dstPort?: number): Buffer {
  if (!src || !dst || srcPort === undefined || dstPort === undefined) return Buffer.from('PROXY UNKNOWN\r\n');
  const s = plain(src);
  const d = plain(dst);
  const family = net.isIPv4(s) && net.isIPv4(d) ? 'TCP4' : net.isIPv6(s) && net.isIPv6(d) ? 'TCP6' : undefined;
  if (!family) return Buffer.from('PROXY UNKNOWN\r\n');
  return Buffer.from(`PROXY ${family} ${s} ${d} ${srcPort} ${dstPort}\r\n`);
}
