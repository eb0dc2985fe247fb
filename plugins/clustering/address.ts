/** Listen addresses as members give them: `host:port`, with the port defaulting to the reference's 8443. */

const DEFAULT_PORT = '8443';

/** Split `host:port`, `[v6]:port`, `host`; undefined when it is none of them. */
export function splitAddress(address: string): { host: string; port: string } | undefined {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*))(?::(\d{1,5}))?$/.exec(address.trim());
  if (!m) return undefined;
  return { host: m[1] ?? m[2] ?? '', port: m[3] ?? DEFAULT_PORT };
}

/** `host:port` with the default port filled in and IPv6 hosts in brackets. */
export function canonicalAddress(address: string): string | undefined {
  const parts = splitAddress(address);
  if (!parts) return undefined;
  return parts.host.includes(':') ? `[${parts.host}]:${parts.port}` : `${parts.host}:${parts.port}`;
}

/** A wildcard (or empty) host cannot be told to other members as where to reach this one. */
export function isWildcard(address: string): boolean {
  const host = splitAddress(address)?.host ?? '';
  return host === '' || host === '0.0.0.0' || host === '::';
}
