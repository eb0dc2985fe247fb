/** The HTTPS listener, started, moved or stopped live as `core.https_address` changes. */
import type Hapi from '@hapi/hapi';
import { isIP } from 'node:net';
import { ApiError, badRequest } from '../../sdk/index.js';

export const DEFAULT_HTTPS_PORT = 8443;

// One DNS label (RFC 1123): letters, digits and inner hyphens.
const LABEL = /^[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$/;

/** A host name, not an IP address: labels, and a last label that is not all digits (`999.1.1.1` is no name). */
function isHostName(host: string): boolean {
  if (host.length > 253) return false;
  const labels = host.replace(/\.$/, '').split('.');
  return labels.every((label) => LABEL.test(label)) && !/^\d+$/.test(labels[labels.length - 1]!);
}

/**
 * `host`, `host:port`, `[v6]`, `[v6]:port` or `:port`; the host is an IP address or a host name.
 * Checked here, before any listener sees the value, so a refusal is always our own message.
 */
export function parseListenAddress(value: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]*)\]|([^:[\]]*))(?::(\d{1,5}))?$/.exec(value.trim());
  if (!m) throw badRequest(`Invalid listen address "${value}" (expected host:port, [IPv6]:port or :port)`);
  const port = m[3] === undefined ? DEFAULT_HTTPS_PORT : Number(m[3]);
  if (port < 1 || port > 65535) throw badRequest(`Invalid port in listen address "${value}" (1 to 65535)`);
  if (m[1] !== undefined) {
    if (isIP(m[1]) !== 6) throw badRequest(`Invalid listen address "${value}": "${m[1]}" is not an IPv6 address`);
    return { host: m[1], port };
  }
  const host = m[2] ?? '';
  if (host === '') return { host: '::', port };
  if (isIP(host) !== 4 && !isHostName(host)) throw badRequest(`Invalid listen address "${value}": "${host}" is not an IP address or host name`);
  return { host, port };
}

/** The config key's validator: the same check, as a plain Error the key registry words. */
export function validateListenAddress(value: string): void {
  try {
    parseListenAddress(value);
  } catch (err) {
    throw new Error((err as Error).message);
  }
}

// Why a listener could not start, in our words; node's own text goes to the log only.
const LISTEN_FAILURES: Record<string, string> = {
  EADDRINUSE: 'the address is already in use',
  EADDRNOTAVAIL: 'the address does not belong to this host',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  ENOTFOUND: 'the host name does not resolve',
  EAI_AGAIN: 'the host name does not resolve',
  EAI_NONAME: 'the host name does not resolve',
  EAFNOSUPPORT: 'the address family is not supported on this host',
};

/** The refusal a client sees when the listener cannot start; the original rides along as `cause` for the log. */
export function listenFailure(address: string, err: unknown): ApiError {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const reason = (code && LISTEN_FAILURES[code]) ?? 'the listener could not start';
  return Object.assign(badRequest(`Cannot listen on "${address}": ${reason}`), { cause: err });
}

export class TlsListener {
  private server: Hapi.Server | undefined;
  private address = '';

  constructor(private readonly make: (host: string, port: number) => Promise<Hapi.Server>) {}

  get current(): string {
    return this.address;
  }

  async apply(address: string): Promise<void> {
    if (address === this.address) return;
    // Refuse a bad value before the running listener is touched.
    const target = address ? parseListenAddress(address) : undefined;
    const previous = this.server;
    if (previous) await previous.stop({ timeout: 1000 });
    this.server = undefined;
    this.address = '';
    if (!target) return;
    try {
      this.server = await this.make(target.host, target.port);
    } catch (err) {
      throw listenFailure(address, err);
    }
    this.address = address;
  }

  /** Serve a new certificate pair from the next handshake on; connections already open keep theirs. */
  setCertificate(cert: string, key: string): void {
    (this.server?.listener as import('node:https').Server | undefined)?.setSecureContext({ cert, key, minVersion: 'TLSv1.2' });
  }

  async stop(): Promise<void> {
    await this.server?.stop({ timeout: 1000 });
    this.server = undefined;
  }
}
