/**
 * Clustering as the kernel offers it. The kernel owns what must sit below every plugin: the document
 * store on etcd, the etcd member beside the daemon, this server's identity, and forwarding of requests
 * and websockets to other members. The clustering plugin owns the API (`/1.0/cluster...`), membership,
 * tokens, roles, health and evacuation, and drives the kernel through `ClusterControlRef`.
 * Every plugin may read the membership through `ctx.cluster` (a `ClusterView`).
 */
import { createServiceRef } from './services.js';

/** A member as the kernel needs it to forward and to show `location`. */
export interface ClusterMemberInfo {
  name: string;
  /** `host:port` of the member's HTTPS listener (its `cluster.https_address`, else `core.https_address`). */
  address: string;
  /** The clustering plugin's verdict from the member's etcd lease; requests to an offline member fail fast (503). */
  online: boolean;
  /**
   * False when automatic placement passes over it: the member is evacuated, or its `scheduler.instance` is
   * `manual` (instances go there only by name) or `group` (only through `?target=@group`). Absent means placeable.
   */
  placeable?: boolean;
  /**
   * False when `?target=@<group>` passes over it too: evacuated, or `scheduler.instance=manual`. Absent
   * means it may be picked for a group it belongs to.
   */
  placeableInGroup?: boolean;
}

/** What any plugin sees of the cluster. Standalone: `enabled` false, `serverName` "none", no members. */
export interface ClusterView {
  readonly enabled: boolean;
  /** This member's name; the `location` of its events, operations and instances. */
  readonly serverName: string;
  /** Every member, this one included, as last published by the clustering plugin. */
  members(): readonly ClusterMemberInfo[];
  /** Called after `enabled`, `serverName` or the members changed. Returns an unsubscribe function. */
  onChange(listener: () => void): () => void;
  /**
   * Ask another member directly (fan-out of listings, placement data), over the kernel's pooled TLS
   * connections with the cluster certificate, as a trusted cluster peer. Bounded; a member that does not
   * answer in time, or is offline, rejects with a 503 ApiError naming it.
   */
  request(member: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
  /**
   * Write what a GET of `path` on another member answers (raw bytes: image files) into `file`, the same
   * way as `request`. Rejects with a 404 ApiError when the member answers 404, with a 503 when it stalls.
   */
  download(member: string, path: string, file: string): Promise<void>;
}

/**
 * A member-specific key of one of the cluster's objects (a storage pool's `source`): GET /1.0/cluster
 * lists the ones a joining server must give (`member_config`, value empty), and the joiner sends them back
 * with values in its PUT /1.0/cluster.
 */
export interface MemberConfigEntry {
  /** `storage-pool` or `network`, as the reference names them. */
  entity: string;
  name: string;
  key: string;
  value: string;
  description: string;
}

/** What the `clusterJoined` kernel hook tells families. */
export interface ClusterJoinInfo {
  serverName: string;
  /** True on the first member (its own data became the cluster's); false on a joiner (its data was discarded). */
  bootstrap: boolean;
  /** The joiner's member-specific keys (empty on the first member). */
  memberConfig: MemberConfigEntry[];
}

/**
 * The cluster database's CA (PEM pair): made by the first member, handed to every joiner, kept apart
 * from the cluster certificate so that rotating that one leaves etcd's trust alone (decision 0062).
 */
export interface EtcdAuthority {
  cert: string;
  key: string;
}

/** TLS material of the etcd member beside the daemon (PEM). */
export interface EtcdTls {
  ca: string;
  cert: string;
  key: string;
}

/** Where one etcd member listens: both on the member's cluster address, on ports the kernel derives. */
export interface EtcdMemberUrls {
  name: string;
  peerUrl: string;
  clientUrl: string;
}

export interface EtcdMemberStatus extends EtcdMemberUrls {
  id: string;
  /** A learner receives the log but does not vote (`database-standby`). */
  learner: boolean;
  leader: boolean;
}

/**
 * The kernel's clustering facility, for the clustering plugin only. Every step that fails reverts what it
 * did: a failed bootstrap or join leaves the server standalone on its sqlite store as it was.
 */
export interface ClusterControl {
  /** Load the clustering machinery ahead of a bootstrap or join (etcd's client takes a moment to load). */
  prepare(): Promise<void>;
  /** The URLs this member's etcd would use when its cluster address is `address` (`host:port`). */
  etcdUrlsFor(name: string, address: string): EtcdMemberUrls;
  /**
   * Turn this standalone server into the first member: start a one-member etcd cluster, copy every
   * document and migration version of the sqlite store into it, switch the store, and take `serverName`.
   * The cluster database gets a CA of its own here.
   */
  bootstrap(opts: { serverName: string; address: string }): Promise<void>;
  // bootstrap and join run the kernel's `clusterJoined` hook once the store is on etcd; a tap that throws reverts the step.
  /**
   * On an existing member, for a joiner: add its etcd member (as a learner when `learner`) and answer
   * what the joiner needs to start its own etcd (`initialCluster` as etcd's `--initial-cluster` value).
   */
  addEtcdMember(urls: EtcdMemberUrls, learner: boolean): Promise<{ initialCluster: string; memberId: string }>;
  /** On a member: the cluster database's CA pair, which a joiner needs to issue its etcd certificate. */
  etcdAuthority(): Promise<EtcdAuthority>;
  /**
   * On the joiner: start its etcd member in the existing cluster with a certificate issued from
   * `authority`, switch the store (its own data is discarded).
   */
  join(opts: { serverName: string; address: string; authority: EtcdAuthority; initialCluster: string; memberConfig: MemberConfigEntry[] }): Promise<void>;
  promoteEtcdMember(memberId: string): Promise<void>;
  removeEtcdMember(memberId: string): Promise<void>;
  /** Refuse (the 503 removeEtcdMember would give) when taking this member out would cost the quorum; changes nothing (since SDK 2.18). */
  checkRemoval(memberId: string): Promise<void>;
  /** Demote this member's etcd voter to a learner (remove, wipe, add back as a learner), bounded. */
  rejoinAsLearner(): Promise<void>;
  etcdMembers(): Promise<EtcdMemberStatus[]>;
  /** The member-specific keys a joiner must give, from every family (the kernel's `memberConfigKeys` hook). */
  memberConfigKeys(): Promise<MemberConfigEntry[]>;
  /** Leave the cluster: stop and wipe this member's etcd; the daemon goes back to a fresh standalone store. */
  leave(): Promise<void>;
  /**
   * Serve with `cert`/`key` from now on (the cluster certificate a joiner receives, or a new one from
   * `PUT /1.0/cluster/certificate`): written to the data dir, and every HTTPS listener switches to it.
   */
  replaceCertificate(cert: string, key: string): Promise<void>;
  /** The PEM pair this server serves with now (the cluster certificate once clustered). */
  certificate(): { cert: string; key: string } | undefined;
  /** Rename this member (after the cluster's records were renamed). */
  rename(serverName: string): void;
  /** Publish the membership the kernel forwards by (and `ClusterView.members()` shows). */
  publishMembers(members: ClusterMemberInfo[]): void;
  /**
   * A lease in etcd kept alive by this member while it runs (`ttlSeconds`); the key is deleted when the
   * lease lapses, which is how other members see this one go OFFLINE. Returns a release function.
   */
  holdLease(key: string, value: string | (() => string), ttlSeconds: number, opts?: { beatMs?: number }): Promise<() => Promise<void>>;
  // With `beatMs` the key is written again that often (a fresh `value()` each time): watchers then see a
  // heartbeat, and can judge a member gone before its lease lapses (decision 0062).
  /**
   * Run `fn` holding the cluster-wide lock `name` (since SDK 2.18): one holder at a time across every
   * member, for changes that must not interleave (etcd membership). `holder` says what the holder does;
   * a caller that waits past `waitMs` (default 30 s) gets a 503 naming it. The lock rides a lease, so a
   * member that dies holding it frees it within seconds.
   */
  exclusively<T>(name: string, holder: string, fn: () => Promise<T>, opts?: { waitMs?: number }): Promise<T>;
  /** Watch keys written with `holdLease` under `prefix`: called with the current set at once and on every change. */
  watchLeases(prefix: string, listener: (held: ReadonlyMap<string, string>) => void): Promise<() => void>;
}

export const ClusterControlRef = createServiceRef<ClusterControl>('kernel.cluster-control');
