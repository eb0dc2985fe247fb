/**
 * Client certificates for the TLS tests, made with the `openssl` CLI: self-signed ones, a small CA
 * (`openssl ca`, so validity dates can be set to the second) and its CRL.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface ClientCert {
  name: string;
  cert: string;
  key: string;
  certFile: string;
  keyFile: string;
  fingerprint: string;
  /** Base64 DER, as `lxc` sends certificates. */
  base64: string;
}

const openssl = (args: string[], cwd: string) => execFileSync('openssl', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });

function load(dir: string, name: string): ClientCert {
  const certFile = path.join(dir, `${name}.crt`);
  const keyFile = path.join(dir, `${name}.key`);
  const cert = readFileSync(certFile, 'utf8');
  const x509 = new X509Certificate(cert);
  return {
    name, cert, key: readFileSync(keyFile, 'utf8'), certFile, keyFile,
    fingerprint: x509.fingerprint256.replace(/:/g, '').toLowerCase(),
    base64: x509.raw.toString('base64'),
  };
}

export function selfSigned(dir: string, name: string, days = 30): ClientCert {
  openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', `${name}.key`, '-out', `${name}.crt`, '-days', String(days), '-subj', `/CN=${name}`], dir);
  return load(dir, name);
}

const CA_CONFIG = `[ ca ]
default_ca = local
[ local ]
dir = .
database = index.txt
new_certs_dir = .
serial = serial
crlnumber = crlnumber
default_md = sha256
policy = anything
unique_subject = no
default_crl_days = 30
[ anything ]
commonName = supplied
[ client ]
basicConstraints = CA:FALSE
extendedKeyUsage = clientAuth
`;

const stamp = (d: Date) => d.toISOString().replace(/[-:T]/g, '').slice(0, 14) + 'Z';

export class TestCa {
  readonly dir: string;
  readonly cert: string;

  constructor(readonly name: string) {
    this.dir = mkdtempSync(path.join(tmpdir(), `corral-ca-${name}-`));
    writeFileSync(path.join(this.dir, 'ca.cnf'), CA_CONFIG);
    writeFileSync(path.join(this.dir, 'index.txt'), '');
    writeFileSync(path.join(this.dir, 'serial'), '1000\n');
    writeFileSync(path.join(this.dir, 'crlnumber'), '1000\n');
    openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '30', '-subj', `/CN=${name} CA`], this.dir);
    this.cert = readFileSync(path.join(this.dir, 'ca.crt'), 'utf8');
  }

  /** A client certificate this CA signs, valid from `start` to `end` (default: a minute ago to 30 days on). */
  issue(name: string, opts: { start?: Date; end?: Date } = {}): ClientCert {
    const start = opts.start ?? new Date(Date.now() - 60_000);
    const end = opts.end ?? new Date(Date.now() + 30 * 86_400_000);
    openssl(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`], this.dir);
    openssl(['ca', '-batch', '-config', 'ca.cnf', '-cert', 'ca.crt', '-keyfile', 'ca.key', '-in', `${name}.csr`, '-out', `${name}.crt`,
      '-startdate', stamp(start), '-enddate', stamp(end), '-extensions', 'client', '-notext'], this.dir);
    return load(this.dir, name);
  }

  revoke(cert: ClientCert): void {
    openssl(['ca', '-batch', '-config', 'ca.cnf', '-cert', 'ca.crt', '-keyfile', 'ca.key', '-revoke', cert.certFile], this.dir);
  }

  /** The CRL in PEM form. */
  crl(): string {
    openssl(['ca', '-batch', '-config', 'ca.cnf', '-cert', 'ca.crt', '-keyfile', 'ca.key', '-gencrl', '-out', 'ca.crl'], this.dir);
    return readFileSync(path.join(this.dir, 'ca.crl'), 'utf8');
  }
}
