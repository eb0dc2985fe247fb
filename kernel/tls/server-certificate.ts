/** The server's TLS certificate, generated in the data dir at first start (ECDSA P-384, like the reference). */
import { readFile, access, chmod } from 'node:fs/promises';
import { X509Certificate } from 'node:crypto';
import { hostname } from 'node:os';
import path from 'node:path';
import type { HostTools } from '../../sdk/index.js';

export interface ServerCertificate {
  cert: string;
  key: string;
  /** SHA-256 of the DER form, lowercase hex. */
  fingerprint: string;
}

export async function ensureServerCertificate(dataDir: string, tools: HostTools): Promise<ServerCertificate> {
  const certFile = path.join(dataDir, 'server.crt');
  const keyFile = path.join(dataDir, 'server.key');
  const exists = await access(certFile).then(() => access(keyFile)).then(() => true, () => false);
  if (!exists) {
    await tools.run('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:secp384r1', '-nodes', '-days', '3650',
      '-subj', `/O=corral/CN=root@${hostname()}`, '-addext', `subjectAltName=DNS:${hostname()},IP:127.0.0.1,IP:::1`,
      '-keyout', keyFile, '-out', certFile,
    ], { timeoutMs: 30_000 });
    await chmod(keyFile, 0o600);
  }
  const [cert, key] = await Promise.all([readFile(certFile, 'utf8'), readFile(keyFile, 'utf8')]);
  return { cert, key, fingerprint: fingerprintOf(cert) };
}

export function fingerprintOf(pem: string): string {
  return new X509Certificate(pem).fingerprint256.replace(/:/g, '').toLowerCase();
}
