/**
 * PKI mode (`auth_pki`): with `server.ca` in the data dir, only client certificates issued by that
 * CA are accepted, and those whose serial is in `ca.crl` are refused. Both files are read at start.
 */
import { readFile } from 'node:fs/promises';
import { X509Certificate } from 'node:crypto';
import path from 'node:path';
import { normaliseSerial, revokedSerials } from './crl.js';

export interface Pki {
  ca: X509Certificate;
  revoked: ReadonlySet<string>;
}

const readIfPresent = (file: string) => readFile(file).catch((err: NodeJS.ErrnoException) => {
  if (err.code === 'ENOENT') return undefined;
  throw err;
});

/** Undefined without `server.ca`; throws (the plugin refuses to boot) on an unreadable CA or CRL, rather than quietly trusting less strictly. */
export async function loadPki(dataDir: string): Promise<Pki | undefined> {
  const caPem = await readIfPresent(path.join(dataDir, 'server.ca'));
  if (!caPem) return undefined;
  let ca: X509Certificate;
  try {
    ca = new X509Certificate(caPem);
  } catch (err) {
    throw new Error(`server.ca is not a certificate: ${(err as Error).message}`);
  }
  const crl = await readIfPresent(path.join(dataDir, 'ca.crl'));
  let revoked = new Set<string>();
  if (crl) {
    try {
      revoked = revokedSerials(crl);
    } catch (err) {
      throw new Error(`ca.crl cannot be read: ${(err as Error).message}`);
    }
  }
  return { ca, revoked };
}

export function issuedBy(cert: X509Certificate, pki: Pki): boolean {
  return cert.checkIssued(pki.ca) && cert.verify(pki.ca.publicKey);
}

export function isRevoked(cert: X509Certificate, pki: Pki): boolean {
  return pki.revoked.has(normaliseSerial(cert.serialNumber));
}
