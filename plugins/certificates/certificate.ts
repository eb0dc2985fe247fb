/** A trusted certificate as stored and as the API shows it, and how client-supplied certificates are read. */
import { X509Certificate } from 'node:crypto';
import { badRequest } from '../../sdk/index.js';

export type CertificateType = 'client' | 'metrics';
export const CERTIFICATE_TYPES: readonly CertificateType[] = ['client', 'metrics'];

/** Field order as the reference shows a certificate. */
export interface TrustedCertificate {
  name: string;
  type: CertificateType;
  restricted: boolean;
  projects: string[];
  certificate: string;
  fingerprint: string;
}

/** The user-modifiable part (PUT body, ETag). */
export const editable = (c: TrustedCertificate) => ({
  name: c.name, type: c.type, restricted: c.restricted, projects: c.projects, certificate: c.certificate,
});

export const certificateUrl = (fingerprint: string): string => `/1.0/certificates/${fingerprint}`;

export interface ParsedCertificate {
  pem: string;
  fingerprint: string;
  x509: X509Certificate;
}

const PEM_BLOCK = /-----BEGIN CERTIFICATE-----([A-Za-z0-9+/=\s]+)-----END CERTIFICATE-----/;

/** Accepts what clients send: base64 DER (the `lxc` client) or a PEM block. */
export function parseCertificate(input: string): ParsedCertificate {
  const block = PEM_BLOCK.exec(input);
  const base64 = (block ? block[1]! : input).replace(/\s+/g, '');
  if (!base64 || !/^[A-Za-z0-9+/]+=*$/.test(base64)) throw badRequest('Invalid certificate material: expected base64 DER or PEM');
  const der = Buffer.from(base64, 'base64');
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(der);
  } catch (err) {
    throw badRequest(`Invalid certificate material: ${(err as Error).message}`);
  }
  return { pem: toPem(x509.raw), fingerprint: fingerprintOf(x509), x509 };
}

export function toPem(der: Buffer): string {
  return `-----BEGIN CERTIFICATE-----\n${der.toString('base64').replace(/(.{64})/g, '$1\n').replace(/\n$/, '')}\n-----END CERTIFICATE-----\n`;
}

/** SHA-256 of the DER bytes, lowercase hex without colons (the API's form). */
export function fingerprintOf(x509: X509Certificate): string {
  return x509.fingerprint256.replace(/:/g, '').toLowerCase();
}

/** The subject's common name (the name given to certificates added without one). */
export function commonName(x509: X509Certificate): string {
  const m = /(?:^|\n)CN=([^\n]*)/.exec(x509.subject);
  return m ? m[1]! : '';
}
