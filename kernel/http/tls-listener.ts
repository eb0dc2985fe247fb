/** The HTTPS listener, started, moved or stopped live as `core.https_address` changes. */
import type Hapi from '@hapi/hapi';
import { badRequest } from '../../sdk/index.js';

export const DEFAULT_HTTPS_PORT = 8443;

export function parseListenAddress(value: string): { host: string; port: number } {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]*))(?::(\d{1,5}))?$/.exec(value.trim());
  if (!m) throw badRequest(`Invalid listen address "${value}"`);
  const host = m[1] ?? m[2] ?? '';
  const port = m[3] === undefined ? DEFAULT_HTTPS_PORT : Number(m[3]);
  if (port < 1 || port > 65535) throw badRequest(`Invalid port in listen address "${value}"`);
  return { host: host === '' ? '::' : host, port };
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
    const previous = this.server;
    if (previous) await previous.stop({ timeout: 1000 });
    this.server = undefined;
    this.address = '';
    if (!address) return;
    const { host, port } = parseListenAddress(address);
    this.server = await this.make(host, port);
    this.address = address;
  }

  async stop(): Promise<void> {
    await this.server?.stop({ timeout: 1000 });
    this.server = undefined;
  }
}
