/**
 * Real etcd clusters for the store and cluster tests: members on loopback addresses of the caller's
 * range (127.0.19.x), TLS from a throwaway cluster certificate as the kernel derives it, started and
 * stopped through the kernel's own EtcdMember and host-tools service.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import bunyan from 'bunyan';
import { createHostTools } from '../../kernel/host-tools/host-tools.js';
import { EtcdMember, etcdUrls } from '../../kernel/cluster/etcd-member.js';
import { issueEtcdMember, newEtcdAuthority } from '../../kernel/cluster/etcd-pki.js';
import { EtcdConnection } from '../../kernel/cluster/etcd-client.js';
import { createSelfSignedCertificate } from '../../kernel/tls/self-signed.js';
import type { EtcdTls } from '../../sdk/index.js';

export const hasEtcd = existsSync('/usr/bin/etcd') ? undefined : 'etcd (Debian etcd-server) is not installed';

export interface TestEtcdMember {
  name: string;
  host: string;
  tls: EtcdTls;
  member: EtcdMember;
  connect(): Promise<EtcdConnection>;
}

export interface TestEtcdCluster {
  dir: string;
  members: TestEtcdMember[];
  clusterCert: { cert: string; key: string };
  stop(): Promise<void>;
}

const quietLog = bunyan.createLogger({ name: 'etcd-test', level: 'fatal' });

/** Start `hosts.length` members (all at once, as a new cluster). */
export async function startEtcdCluster(hosts: string[]): Promise<TestEtcdCluster> {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-etcd-'));
  const clusterCert = createSelfSignedCertificate({ organization: 'corral', commonName: 'test cluster', dnsNames: [], ips: [], days: 2 });
  const authority = newEtcdAuthority();
  const hostTools = createHostTools(quietLog);
  const initialCluster = hosts.map((h, i) => `m${i + 1}=${etcdUrls(`m${i + 1}`, h).peerUrl}`).join(',');
  const members: TestEtcdMember[] = [];
  const connections: EtcdConnection[] = [];
  for (const [i, host] of hosts.entries()) {
    const name = `m${i + 1}`;
    const tls = issueEtcdMember(authority, host);
    const memberDir = path.join(dir, name);
    await EtcdMember.writeTls(memberDir, tls);
    const member = new EtcdMember(hostTools, quietLog, memberDir, { urls: etcdUrls(name, host), initialCluster, state: 'new' });
    members.push({
      name, host, tls, member,
      connect: async () => {
        const c = await EtcdConnection.open(etcdUrls(name, host).clientUrl, [], tls);
        connections.push(c);
        return c;
      },
    });
  }
  try {
    // Members of a new cluster wait for each other: start them together.
    await Promise.all(members.map((m) => m.member.start(m.tls)));
  } catch (err) {
    await Promise.all(members.map((m) => m.member.stop()));
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    dir, members, clusterCert,
    async stop() {
      for (const c of connections) c.close();
      await Promise.all(members.map((m) => m.member.stop()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
