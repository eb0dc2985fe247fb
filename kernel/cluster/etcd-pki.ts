/**
 * The cluster database's TLS (decision 0062): a CA of its own, made once by the first member with a
 * fresh key, independent of the cluster certificate. Every member holds the CA pair (a joiner receives
 * it with the cluster certificate, over the token-checked accept) and issues its own etcd member
 * certificate from it, with IP SANs of its cluster address. Rotating the cluster certificate therefore
 * leaves etcd's trust as it was: no member's etcd has to restart, and a later joiner is trusted.
 */
import { createPrivateKey, generateKeyPairSync, X509Certificate, type KeyObject } from 'node:crypto';
import { isIP } from 'node:net';
import { badRequest, type EtcdAuthority, type EtcdTls } from '../../sdk/index.js';
import { issueCertificate, type CertificateName } from '../tls/self-signed.js';

const CA_NAME: CertificateName = { organization: 'corral', commonName: 'corral cluster database' };
const DAYS = 3650;

/** `host` of a `host:port` (brackets of IPv6 removed). */
export function hostOf(address: string): string {
  const m = /^\[([^\]]+)\](?::\d+)?$/.exec(address) ?? /^([^:]+)(?::\d+)?$/.exec(address);
  return m ? m[1]! : address;
}

/** A new cluster database CA (the first member's bootstrap). */
export function newEtcdAuthority(): EtcdAuthority {
  const pair = generateKeyPairSync('ec', { namedCurve: 'secp384r1' });
  const cert = issueCertificate({ subject: CA_NAME, publicKey: pair.publicKey, signer: { name: CA_NAME, key: pair.privateKey }, dnsNames: [], ips: [], days: DAYS, ca: true });
  return { cert, key: pair.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string };
}

/** The CA's private key, or a 400 when the pair is not a CA certificate with its key. */
function authorityKey(authority: EtcdAuthority): KeyObject {
  let key: KeyObject;
  let x509: X509Certificate;
  try {
    key = createPrivateKey(authority.key);
    x509 = new X509Certificate(authority.cert);
  } catch {
    throw badRequest('The cluster database CA certificate or key is not valid PEM');
  }
  if (!x509.checkPrivateKey(key)) throw badRequest('The cluster database CA key does not match its certificate');
  if (!x509.ca) throw badRequest('The cluster database CA certificate is not a CA certificate');
  return key;
}

/** Whether `key` (PEM) is the private key of `cert` (PEM); false for anything unreadable. */
export function sameKeyPair(cert: string, key: string): boolean {
  try {
    return new X509Certificate(cert).checkPrivateKey(createPrivateKey(key));
  } catch {
    return false;
  }
}

/**
 * This member's etcd TLS, issued from the cluster database CA, for a member listening on `host`.
 * A loopback member also names 127.0.0.1: connections between loopback addresses leave from it,
 * and etcd checks a client certificate's IP SANs against the connection's source.
 */
export function issueEtcdMember(authority: EtcdAuthority, host: string): EtcdTls {
  if (!isIP(host)) throw badRequest(`The cluster address must be an IP address (the cluster database checks IP addresses in certificates), not "${host}"`);
  const key = authorityKey(authority);
  const member = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const ips = [host, ...(host.startsWith('127.') && host !== '127.0.0.1' ? ['127.0.0.1'] : [])];
  const cert = issueCertificate({
    subject: { organization: 'corral', commonName: `etcd ${host}` }, publicKey: member.publicKey,
    signer: { name: CA_NAME, key }, dnsNames: [], ips, days: DAYS, ca: false,
  });
  return { ca: authority.cert, cert, key: member.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string };
}
