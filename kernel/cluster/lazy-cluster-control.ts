/**
 * ClusterControl as the kernel provides it: a standalone server never loads etcd's client (etcd3 with
 * gRPC costs about 26 MiB and half a second at start, measured here), so the implementation is imported
 * on the first call that needs etcd, or at boot when the data dir says this server is a member.
 */
import type {
  ClusterControl, ClusterMemberInfo, EtcdAuthority, EtcdMemberStatus, EtcdMemberUrls, MemberConfigEntry,
} from '../../sdk/index.js';
import type { DocumentStore } from '../store/document-store.js';
import type { ClusterControlDeps, KernelClusterControl } from './cluster-control.js';
import { readClusterState } from './cluster-state.js';
import { etcdUrls } from './etcd-urls.js';
import { hostOf } from './etcd-pki.js';

export class LazyClusterControl implements ClusterControl {
  private loading: Promise<KernelClusterControl> | undefined;
  private loaded: KernelClusterControl | undefined;

  constructor(private readonly deps: ClusterControlDeps) {}

  private impl(): Promise<KernelClusterControl> {
    this.loading ??= import('./cluster-control.js').then(({ KernelClusterControl }) => (this.loaded = new KernelClusterControl(this.deps)));
    return this.loading;
  }

  /** At boot: only a member's data dir loads etcd's client. */
  async resume(): Promise<DocumentStore | undefined> {
    if (!(await readClusterState(this.deps.dataDir))) return undefined;
    return (await this.impl()).resume();
  }

  async shutdown(): Promise<void> {
    await this.loaded?.shutdown();
  }

  async prepare(): Promise<void> {
    await this.impl();
  }

  etcdUrlsFor(name: string, address: string): EtcdMemberUrls {
    return etcdUrls(name, hostOf(address));
  }

  async bootstrap(opts: { serverName: string; address: string }): Promise<void> {
    return (await this.impl()).bootstrap(opts);
  }

  async addEtcdMember(urls: EtcdMemberUrls, learner: boolean): Promise<{ initialCluster: string; memberId: string }> {
    return (await this.impl()).addEtcdMember(urls, learner);
  }

  async etcdAuthority(): Promise<EtcdAuthority> {
    return (await this.impl()).etcdAuthority();
  }

  async join(opts: { serverName: string; address: string; authority: EtcdAuthority; initialCluster: string; memberConfig: MemberConfigEntry[] }): Promise<void> {
    return (await this.impl()).join(opts);
  }

  async promoteEtcdMember(memberId: string): Promise<void> {
    return (await this.impl()).promoteEtcdMember(memberId);
  }

  async removeEtcdMember(memberId: string): Promise<void> {
    return (await this.impl()).removeEtcdMember(memberId);
  }

  async rejoinAsLearner(): Promise<void> {
    return (await this.impl()).rejoinAsLearner();
  }

  async etcdMembers(): Promise<EtcdMemberStatus[]> {
    return (await this.impl()).etcdMembers();
  }

  async memberConfigKeys(): Promise<MemberConfigEntry[]> {
    return this.deps.hooks ? this.deps.hooks.memberConfigKeys.promise([]) : [];
  }

  async leave(): Promise<void> {
    return (await this.impl()).leave();
  }

  replaceCertificate(cert: string, key: string): Promise<void> {
    return this.deps.replaceCertificate(cert, key);
  }

  certificate(): { cert: string; key: string } | undefined {
    return this.deps.certificate();
  }

  rename(serverName: string): void {
    // Only a member is renamed, and a member has loaded the implementation.
    if (!this.loaded) throw new Error('a server that is not clustered has no member name to change');
    this.loaded.rename(serverName);
  }

  publishMembers(members: ClusterMemberInfo[]): void {
    this.deps.view.setMembers(members);
  }

  async exclusively<T>(name: string, holder: string, fn: () => Promise<T>, opts?: { waitMs?: number }): Promise<T> {
    return (await this.impl()).exclusively(name, holder, fn, opts);
  }

  async checkRemoval(memberId: string): Promise<void> {
    return (await this.impl()).checkRemoval(memberId);
  }

  async holdLease(key: string, value: string | (() => string), ttlSeconds: number, opts?: { beatMs?: number }): Promise<() => Promise<void>> {
    return (await this.impl()).holdLease(key, value, ttlSeconds, opts);
  }

  async watchLeases(prefix: string, listener: (held: ReadonlyMap<string, string>) => void): Promise<() => void> {
    return (await this.impl()).watchLeases(prefix, listener);
  }
}
