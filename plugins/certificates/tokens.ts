/**
 * Certificate add tokens (`certificate_token`): a token is a `token`-class operation holding a
 * random secret; `lxc config trust add` turns its metadata into the base64 JSON token the other
 * client redeems with `POST /1.0/certificates {"password": <token>}`. Redeeming cancels it.
 */
import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { networkInterfaces } from 'node:os';
import path from 'node:path';
import { randomHex, sameSecret, type Operation, type OperationsService, type Requestor } from '../../sdk/index.js';
import type { CertificateType } from './certificate.js';

/** What the token was asked for: the new certificate gets these. */
export interface TokenRequest {
  name: string;
  type: CertificateType;
  restricted: boolean;
  projects: string[];
}

/** The operation metadata, shaped as the 5.0 client reads it. */
interface TokenMetadata {
  request: TokenRequest & { certificate: string; password: string; token: true };
  secret: string;
  fingerprint: string;
  addresses: string[];
}

/** Every address the listener answers on, expanded when it listens on all interfaces. */
export function listenAddresses(httpsAddress: string): string[] {
  if (!httpsAddress) return [];
  const m = /^(?:\[([^\]]+)\]|([^:]*))(?::(\d+))?$/.exec(httpsAddress);
  if (!m) return [httpsAddress];
  const host = m[1] ?? m[2] ?? '';
  const port = m[3] ?? '8443';
  if (host && host !== '0.0.0.0' && host !== '::') return [host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`];
  const out: string[] = [];
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) {
      if (a.internal || (host === '0.0.0.0' && a.family !== 'IPv4') || (a.family === 'IPv6' && a.address.startsWith('fe80'))) continue;
      out.push(a.family === 'IPv6' ? `[${a.address}]:${port}` : `${a.address}:${port}`);
    }
  }
  return out;
}

/** The server certificate's fingerprint, read from the data dir (the kernel writes it there). */
async function serverFingerprint(dataDir: string): Promise<string> {
  const pem = await readFile(path.join(dataDir, 'server.crt'), 'utf8').catch(() => undefined);
  return pem ? new X509Certificate(pem).fingerprint256.replace(/:/g, '').toLowerCase() : '';
}

export class CertificateTokens {
  /** Tokens already taken (marked before the cancel is awaited, so a racing second client finds it gone). */
  private readonly consumed = new Set<string>();

  constructor(private readonly operations: OperationsService, private readonly dataDir: string, private readonly httpsAddress: () => string) {}

  async issue(request: TokenRequest, requestor: Requestor): Promise<Operation> {
    const metadata: TokenMetadata = {
      request: { ...request, certificate: '', password: '', token: true },
      secret: randomHex(32),
      fingerprint: await serverFingerprint(this.dataDir),
      addresses: listenAddresses(this.httpsAddress()),
    };
    return this.operations.create({
      class: 'token',
      description: 'Certificate add token',
      metadata: metadata as unknown as Record<string, unknown>,
      mayCancel: true,
      requestor,
    });
  }

  /**
   * The running token whose secret was offered, consumed (its operation cancelled) so it works once.
   * `offered` is the whole base64 token as the client sends it, or the bare secret.
   */
  async redeem(offered: string): Promise<TokenRequest | undefined> {
    const offeredSecret = secretOf(offered);
    for (const op of this.operations.list({ class: 'token' })) {
      if (this.consumed.has(op.id)) continue;
      const meta = op.view().metadata as unknown as TokenMetadata | null;
      if (!meta || typeof meta.secret !== 'string') continue;
      if (!sameSecret(meta.secret, offeredSecret)) continue;
      this.consumed.add(op.id);
      setTimeout(() => this.consumed.delete(op.id), 60_000).unref();
      await this.operations.cancel(op.id).catch(() => undefined);
      const { name, type, restricted, projects } = meta.request;
      return { name, type, restricted, projects };
    }
    return undefined;
  }
}

function secretOf(offered: string): string {
  if (/^[0-9a-f]{64}$/.test(offered)) return offered;
  try {
    const decoded = JSON.parse(Buffer.from(offered, 'base64').toString('utf8')) as { secret?: unknown };
    return typeof decoded.secret === 'string' ? decoded.secret : offered;
  } catch {
    return offered;
  }
}
