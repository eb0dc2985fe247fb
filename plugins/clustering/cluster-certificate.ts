/**
 * `PUT /1.0/cluster/certificate`: a new certificate pair for the whole cluster. It is kept in the cluster
 * store; every member applies it (serves with it) when it sees the record change, this one at once.
 */
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { badRequest, type ClusterControl, type Collection } from '../../sdk/index.js';

export interface CertificateRecord {
  cert: string;
  key: string;
}

export const CERTIFICATE_COLLECTION = 'certificate';
export const CERTIFICATE_NAME = 'cluster';

/** A 400 unless `cert` is a PEM certificate and `key` its private key. */
export function checkPair(cert: unknown, key: unknown): { cert: string; key: string } {
  if (typeof cert !== 'string' || !cert.trim()) throw badRequest('A cluster certificate is required (cluster_certificate)');
  if (typeof key !== 'string' || !key.trim()) throw badRequest('A cluster certificate key is required (cluster_certificate_key)');
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(cert);
  } catch {
    throw badRequest('The cluster certificate is not a valid PEM certificate');
  }
  let privateKey;
  try {
    privateKey = createPrivateKey(key);
  } catch {
    throw badRequest('The cluster certificate key is not a valid PEM private key');
  }
  if (!x509.checkPrivateKey(privateKey)) throw badRequest('The cluster certificate key does not match the certificate');
  return { cert, key };
}

export class ClusterCertificate {
  constructor(private readonly records: Collection<CertificateRecord>, private readonly control: () => ClusterControl | undefined) {}

  async replace(pair: CertificateRecord): Promise<void> {
    const control = this.control();
    if (!control) return;
    const previous = control.certificate();
    await control.replaceCertificate(pair.cert, pair.key);
    try {
      await this.records.put('', CERTIFICATE_NAME, pair);
    } catch (err) {
      if (previous) await control.replaceCertificate(previous.cert, previous.key).catch(() => undefined);
      throw err;
    }
  }

  /** Serve with the stored pair when it differs from the one served now (another member changed it). */
  async follow(): Promise<void> {
    const control = this.control();
    const stored = await this.records.get('', CERTIFICATE_NAME);
    if (!control || !stored) return;
    if (control.certificate()?.cert.trim() === stored.doc.cert.trim()) return;
    await control.replaceCertificate(stored.doc.cert, stored.doc.key);
  }
}
