/**
 * The cluster database's TLS, derived from the cluster certificate (decision 0055): whoever holds the
 * cluster key makes a CA certificate with that key and issues its own etcd member certificate (IP SANs
 * of its cluster address) from it. Every member's certificate then chains to "a CA with the cluster
 * key", so etcd peers and clients trust exactly the holders of the cluster certificate.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import type { EtcdTls } from '../../sdk/index.js';
import { issueCertificate, type CertificateName } from '../tls/self-signed.js';

const CA_NAME: CertificateName = { organization: 'corral', commonName: 'corral cluster database' };
const DAYS = 3650;

/** `host` of a `host:port` (brackets of IPv6 removed). */
export function hostOf(address: string): string {
  const m = /^\[([^\]]+)\](?::\d+)?$/.exec(address) ?? /^([^:]+)(?::\d+)?$/.exec(address);
  return m ? m[1]! : address;
}

/**
 * This member's etcd TLS from the cluster certificate and key, for a member listening on `host`.
 * A loopback member also names 127.0.0.1: connections between loopback addresses leave from it,
 * and etcd checks a client certificate's IP SANs against the connection's source.
 */
export function etcdTlsFromCluster(clusterCert: string, clusterKey: string, host: string): EtcdTls {
  if (!isIP(host)) throw new Error(`the cluster address must be an IP address (etcd checks IP SANs), not "${host}"`);
  const key = createPrivateKey(clusterKey);
  const publicKey = createPublicKey(key);
  const certKey = new X509Certificate(clusterCert).publicKey;
  if (!certKey.equals(publicKey)) throw new Error('the cluster key does not match the cluster certificate');
  const ca = issueCertificate({ subject: CA_NAME, publicKey, signer: { name: CA_NAME, key }, dnsNames: [], ips: [], days: DAYS, ca: true });
  const member = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const ips = [host, ...(host.startsWith('127.') && host !== '127.0.0.1' ? ['127.0.0.1'] : [])];
  const cert = issueCertificate({
    subject: { organization: 'corral', commonName: `etcd ${host}` }, publicKey: member.publicKey,
    signer: { name: CA_NAME, key }, dnsNames: [], ips, days: DAYS, ca: false,
  });
  return { ca, cert, key: member.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string };
}
