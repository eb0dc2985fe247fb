/**
 * A member of a cluster formed before the cluster database CA had a key of its own (decision 0062):
 * its CA was made with the cluster key and no CA key file was kept. Such a member still hands out the
 * CA to joiners (the cluster key is the CA key, kept from then on in the CA key file), and one whose CA
 * is not the cluster key's refuses with a message of ours. Real kernel, real etcd on 127.0.26.1.
 */
import test from 'ava';
import { createPrivateKey, createPublicKey } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Kernel } from '../../kernel/kernel.js';
import { ClusterControlRef, type ClusterControl } from '../../sdk/index.js';
import { createSelfSignedCertificate, issueCertificate } from '../../kernel/tls/self-signed.js';
import { hasEtcd } from '../helpers/etcd-cluster.js';
import { serialUnless } from '../helpers/needs.js';
import { distRoot, projectRoot } from '../helpers/daemon.js';

const serial = serialUnless(hasEtcd);
const root = mkdtempSync(path.join(tmpdir(), 'corral-ca-upgrade-'));
let kernel: Kernel | undefined;

test.after.always(async () => {
  await kernel?.stop().catch(() => undefined);
  rmSync(root, { recursive: true, force: true });
});

/** A CA certificate made with `keyPem`, as members made theirs before decision 0062. */
function caMadeWith(keyPem: string): string {
  const key = createPrivateKey(keyPem);
  const name = { organization: 'corral', commonName: 'corral cluster database' };
  return issueCertificate({ subject: name, publicKey: createPublicKey(key), signer: { name, key }, dnsNames: [], ips: [], days: 30, ca: true });
}

serial('a member whose CA was made with the cluster key hands it out and keeps its key; another CA is refused with our message', async (t) => {
  const dataDir = path.join(root, 'm1');
  mkdirSync(dataDir, { recursive: true });
  kernel = await Kernel.start({
    dataDir, storeFile: path.join(dataDir, 'state.db'), registryFile: path.join(projectRoot, 'plugin-registry.json'),
    plugins: 'warnings,projects,profiles', compiledRoot: distRoot, logLevel: 'fatal',
  });
  const control = kernel.services.get(ClusterControlRef) as ClusterControl;
  await control.bootstrap({ serverName: 'm1', address: '127.0.26.1:8443' });
  const clusterKey = control.certificate()!.key;
  const etcd = path.join(dataDir, 'cluster', 'etcd');
  const caKeyFile = path.join(etcd, 'ca.key');
  t.true(existsSync(caKeyFile), 'a new cluster keeps its CA key');

  // The layout of an older member: the CA made with the cluster key, no CA key file.
  writeFileSync(path.join(etcd, 'ca.crt'), caMadeWith(clusterKey));
  rmSync(caKeyFile);
  const adopted = await control.etcdAuthority();
  t.is(adopted.key, clusterKey);
  t.is(statSync(caKeyFile).mode & 0o777, 0o600);

  // A CA that is not the cluster key's, without its key: nothing to hand out, and no file text leaks.
  const other = createSelfSignedCertificate({ organization: 'corral', commonName: 'other', dnsNames: [], ips: [], days: 1 });
  writeFileSync(path.join(etcd, 'ca.crt'), caMadeWith(other.key));
  rmSync(caKeyFile);
  const refused = await t.throwsAsync(control.etcdAuthority());
  t.is((refused as { status?: number }).status, 503);
  t.regex(refused!.message, /cannot hand out the cluster database CA/);
  t.notRegex(refused!.message, /ENOENT|\/tmp\//);
});
