/** The server's TLS certificate, generated in the data dir at first start (ECDSA P-384, like the reference). */
import { readFile, writeFile, access } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { hostname } from 'node:os';
import path from 'node:path';
import { createSelfSignedCertificate } from './self-signed.js';

export interface ServerCertificate {
  cert: string;
  key: string;
  /** SHA-256 of the DER form, lowercase hex. */
  fingerprint: string;
}

export async function ensureServerCertificate(dataDir: string): Promise<ServerCertificate> {
  const certFile = path.join(dataDir, 'server.crt');
  const keyFile = path.join(dataDir, 'server.key');
  const exists = await access(certFile).then(() => access(keyFile)).then(() => true, () => false);
  if (!exists) {
    const host = hostname();
    const fresh = createSelfSignedCertificate({ organization: 'corral', commonName: `root@${host}`, dnsNames: [host], ips: ['127.0.0.1', '::1'], days: 3650 });
    await writeFile(keyFile, fresh.key, { mode: 0o600 });
    await writeFile(certFile, fresh.cert, { mode: 0o644 });
  }
  const [cert, key] = await Promise.all([readFile(certFile, 'utf8'), readFile(keyFile, 'utf8')]);
  return { cert, key, fingerprint: fingerprintOf(cert) };
}

/** Replace the server's certificate pair in the data dir (the key first: a crash leaves no pair that disagrees for long). */
export async function writeServerCertificate(dataDir: string, cert: string, key: string): Promise<ServerCertificate> {
  await writeFile(path.join(dataDir, 'server.key'), key, { mode: 0o600 });
  await writeFile(path.join(dataDir, 'server.crt'), cert, { mode: 0o644 });
  return { cert, key, fingerprint: fingerprintOf(cert) };
}

/** SHA-256 of the certificate's DER bytes (the base64 body of the PEM). */
export function fingerprintOf(pem: string): string {
  const body = pem.replace(/-----(BEGIN|END) CERTIFICATE-----/g, '').replace(/\s+/g, '');
  return createHash('sha256').update(Buffer.from(body, 'base64')).digest('hex');
}
