/**
 * Requests to another member before this server is one (the join) or to reach a member directly
 * (telling a removed member to leave): HTTPS pinned to a certificate fingerprint, whatever address it
 * is reached at, optionally presenting the cluster certificate as client certificate. Bounded.
 */
import https from 'node:https';
import { X509Certificate } from 'node:crypto';
import type { TLSSocket } from 'node:tls';

export const PEER_TIMEOUT_MS = 10_000;

export function fingerprintOf(pem: string): string {
  return new X509Certificate(pem).fingerprint256.replace(/:/g, '').toLowerCase();
}

export interface PeerAnswer {
  status: number;
  body: any;
  /** PEM of the certificate the peer presented. */
  certificate: string;
}

const toPem = (raw: Buffer): string => `-----BEGIN CERTIFICATE-----\n${raw.toString('base64').replace(/(.{64})/g, '$1\n').replace(/\n$/, '')}\n-----END CERTIFICATE-----\n`;

/** One JSON request to `address` (`host:port`); rejects when the peer's certificate is not `fingerprint`. */
export function peerRequest(opts: {
  address: string;
  fingerprint: string;
  method: string;
  path: string;
  body?: unknown;
  client?: { cert: string; key: string };
  timeoutMs?: number;
}): Promise<PeerAnswer> {
  const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
  const url = new URL(`https://${opts.address}${opts.path}`);
  return new Promise((resolve, reject) => {
    let presented = '';
    const req = https.request({
      host: url.hostname.replace(/^\[|\]$/g, ''),
      port: url.port || 8443,
      method: opts.method,
      path: url.pathname + url.search,
      headers: payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
      // The pin replaces the CA check (members serve self-signed certificates): checked below, before anything is sent.
      rejectUnauthorized: false,
      cert: opts.client?.cert,
      key: opts.client?.key,
      agent: false,
      timeout: opts.timeoutMs ?? PEER_TIMEOUT_MS,
    });
    req.on('timeout', () => req.destroy(new Error(`${opts.address} did not answer within ${(opts.timeoutMs ?? PEER_TIMEOUT_MS) / 1000}s`)));
    req.on('error', reject);
    req.on('socket', (socket) => {
      (socket as TLSSocket).once('secureConnect', () => {
        const raw = (socket as TLSSocket).getPeerCertificate()?.raw;
        presented = raw ? toPem(raw) : '';
        let got = 'none';
        try { if (presented) got = fingerprintOf(presented); } catch { /* not a certificate */ }
        if (got !== opts.fingerprint.toLowerCase()) {
          req.destroy(new Error(`the server at ${opts.address} presented certificate ${got.slice(0, 12)}, not the expected ${opts.fingerprint.slice(0, 12)}`));
          return;
        }
        // Only now: the body may carry a join secret.
        req.end(payload);
      });
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: any = text;
        try { body = JSON.parse(text); } catch { /* not JSON */ }
        resolve({ status: res.statusCode ?? 0, body, certificate: presented });
      });
    });
  });
}
