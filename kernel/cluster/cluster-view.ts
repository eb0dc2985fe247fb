/**
 * The kernel's record of the cluster, read by every plugin as `ctx.cluster`. Standalone it says so and
 * names the server "none", as the reference does; the clustering plugin changes it through ClusterControl.
 */
import { ApiError, type ClusterMemberInfo, type ClusterView } from '../../sdk/index.js';

/** Event `location` and member name of a server that is not clustered, as the reference reports it. */
export const STANDALONE_NAME = 'none';

export type MemberDownload = (member: ClusterMemberInfo, path: string, file: string) => Promise<void>;

export type MemberRequest = (member: ClusterMemberInfo, method: string, path: string, body?: unknown) => Promise<{ status: number; body: any }>;

export class KernelClusterView implements ClusterView {
  private state = { enabled: false, serverName: STANDALONE_NAME };
  private list: readonly ClusterMemberInfo[] = [];
  private readonly listeners = new Set<() => void>();
  /** Set by the forwarding layer once it exists; until then no member can be asked. */
  sender: MemberRequest | undefined;
  downloader: MemberDownload | undefined;

  get enabled(): boolean {
    return this.state.enabled;
  }

  get serverName(): string {
    return this.state.serverName;
  }

  members(): readonly ClusterMemberInfo[] {
    return this.list;
  }

  member(name: string): ClusterMemberInfo | undefined {
    return this.list.find((m) => m.name === name);
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async request(member: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const info = this.reachable(member);
    if (!this.sender) throw new ApiError(503, 'This server cannot reach other cluster members');
    return this.sender(info, method, path, body);
  }

  async download(member: string, path: string, file: string): Promise<void> {
    const info = this.reachable(member);
    if (!this.downloader) throw new ApiError(503, 'This server cannot reach other cluster members');
    return this.downloader(info, path, file);
  }

  private reachable(member: string): ClusterMemberInfo {
    const info = this.member(member);
    if (!info) throw new ApiError(404, `Cluster member "${member}" not found`);
    if (!info.online) throw new ApiError(503, `Cluster member "${member}" is offline`);
    return info;
  }

  /** Kernel only: a new identity (enable, join, rename, leave). */
  setIdentity(enabled: boolean, serverName: string): void {
    this.state = { enabled, serverName };
    this.changed();
  }

  /** Kernel only: the membership the clustering plugin published. */
  setMembers(members: ClusterMemberInfo[]): void {
    this.list = Object.freeze(members.map((m) => Object.freeze({ ...m })));
    this.changed();
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }
}
