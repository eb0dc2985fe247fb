/**
 * A self-signed X.509 certificate built with node:crypto alone (ECDSA P-384, SHA-384), so the first
 * start needs no child process. Only the DER needed for TLS certificates and a small CA is encoded here.
 */
import { generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';

const der = (tag: number, ...parts: Buffer[]): Buffer => {
  const body = Buffer.concat(parts);
  const n = body.length;
  const length = n < 0x80 ? Buffer.from([n]) : n < 0x100 ? Buffer.from([0x81, n]) : Buffer.from([0x82, n >> 8, n & 0xff]);
  return Buffer.concat([Buffer.from([tag]), length, body]);
};
const seq = (...parts: Buffer[]) => der(0x30, ...parts);
const set = (...parts: Buffer[]) => der(0x31, ...parts);
const utf8 = (s: string) => der(0x0c, Buffer.from(s, 'utf8'));
const bool = (v: boolean) => der(0x01, Buffer.from([v ? 0xff : 0]));
const octets = (b: Buffer) => der(0x04, b);
const bits = (b: Buffer) => der(0x03, Buffer.from([0]), b);
const explicit = (n: number, inner: Buffer) => der(0xa0 + n, inner);

function oid(dotted: string): Buffer {
  const [a, b, ...rest] = dotted.split('.').map(Number);
  const bytes = [a! * 40 + b!];
  for (const v of rest) {
    const chunk = [v & 0x7f];
    for (let x = v >> 7; x > 0; x >>= 7) chunk.unshift((x & 0x7f) | 0x80);
    bytes.push(...chunk);
  }
  return der(0x06, Buffer.from(bytes));
}

function integer(b: Buffer): Buffer {
  let i = 0;
  while (i < b.length - 1 && b[i] === 0) i++;
  const trimmed = b.subarray(i);
  return der(0x02, trimmed[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), trimmed]) : trimmed);
}

/** GeneralizedTime works for every date; UTCTime is required before 2050 by RFC 5280. */
function time(d: Date): Buffer {
  const iso = d.toISOString().replace(/[-:T]/g, '').slice(0, 14) + 'Z';
  return d.getUTCFullYear() < 2050 ? der(0x17, Buffer.from(iso.slice(2))) : der(0x18, Buffer.from(iso));
}

function ipBytes(ip: string): Buffer {
  if (ip.includes(':')) {
    const [head = '', tail = ''] = ip.split('::');
    const h = head ? head.split(':') : [];
    const t = tail ? tail.split(':') : [];
    const groups = ip.includes('::') ? [...h, ...Array(8 - h.length - t.length).fill('0'), ...t] : h;
    return Buffer.from(groups.flatMap((g) => [parseInt(g, 16) >> 8, parseInt(g, 16) & 0xff]));
  }
  return Buffer.from(ip.split('.').map(Number));
}

export interface SelfSigned {
  cert: string;
  key: string;
}

export function createSelfSignedCertificate(opts: { organization: string; commonName: string; dnsNames: string[]; ips: string[]; days: number }): SelfSigned {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'secp384r1' });
  const cert = issueCertificate({
    subject: { organization: opts.organization, commonName: opts.commonName },
    publicKey, signer: { name: { organization: opts.organization, commonName: opts.commonName }, key: privateKey },
    dnsNames: opts.dnsNames, ips: opts.ips, days: opts.days, ca: false,
  });
  return { cert, key: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string };
}

export interface CertificateName {
  organization: string;
  commonName: string;
}

const nameOf = (n: CertificateName) => seq(
  set(seq(oid('2.5.4.10'), utf8(n.organization))),
  set(seq(oid('2.5.4.3'), utf8(n.commonName))),
);

/** The signature algorithm for the signer's key type: ECDSA with SHA-384, or RSA with SHA-256. */
function signatureAlgorithm(key: KeyObject): { id: Buffer; hash: string } {
  if (key.asymmetricKeyType === 'ec') return { id: seq(oid('1.2.840.10045.4.3.3')), hash: 'sha384' };
  if (key.asymmetricKeyType === 'rsa') return { id: seq(oid('1.2.840.113549.1.1.11'), der(0x05)), hash: 'sha256' };
  throw new Error(`cannot sign certificates with a ${key.asymmetricKeyType} key`);
}

/**
 * A certificate for `publicKey`, signed by `signer` (itself for a self-signed one): a CA (`ca`: may sign
 * certificates) or a TLS server and client certificate with the given names.
 */
export function issueCertificate(opts: {
  subject: CertificateName; publicKey: KeyObject; signer: { name: CertificateName; key: KeyObject };
  dnsNames: string[]; ips: string[]; days: number; ca: boolean;
}): string {
  const algorithm = signatureAlgorithm(opts.signer.key);
  const now = new Date();
  const notBefore = new Date(now.getTime() - 60_000);
  const notAfter = new Date(now.getTime() + opts.days * 86_400_000);
  const altNames = seq(
    ...opts.dnsNames.map((n) => der(0x82, Buffer.from(n))),
    ...opts.ips.map((ip) => der(0x87, ipBytes(ip))),
  );
  const extensions = explicit(3, seq(...(opts.ca
    ? [
      seq(oid('2.5.29.19'), bool(true), octets(seq(bool(true)))), // basicConstraints: a CA
      seq(oid('2.5.29.15'), bool(true), octets(der(0x03, Buffer.from([0x01, 0x86])))), // keyUsage: digitalSignature, keyCertSign, cRLSign
    ]
    : [
      seq(oid('2.5.29.19'), bool(true), octets(seq())), // basicConstraints: not a CA
      seq(oid('2.5.29.15'), bool(true), octets(der(0x03, Buffer.from([0x05, 0xa0])))), // keyUsage: digitalSignature, keyEncipherment
      seq(oid('2.5.29.37'), octets(seq(oid('1.3.6.1.5.5.7.3.1'), oid('1.3.6.1.5.5.7.3.2')))), // serverAuth, clientAuth
      ...(opts.dnsNames.length || opts.ips.length ? [seq(oid('2.5.29.17'), octets(altNames))] : []),
    ])));
  const serial = randomBytes(16);
  serial[0]! &= 0x7f;
  const tbs = seq(
    explicit(0, integer(Buffer.from([2]))), // v3
    integer(serial),
    algorithm.id,
    nameOf(opts.signer.name),
    seq(time(notBefore), time(notAfter)),
    nameOf(opts.subject),
    opts.publicKey.export({ type: 'spki', format: 'der' }),
    extensions,
  );
  const signature = sign(algorithm.hash, tbs, opts.signer.key);
  const certificate = seq(tbs, algorithm.id, bits(signature));
  return `-----BEGIN CERTIFICATE-----\n${certificate.toString('base64').replace(/(.{64})/g, '$1\n').replace(/\n$/, '')}\n-----END CERTIFICATE-----\n`;
}
