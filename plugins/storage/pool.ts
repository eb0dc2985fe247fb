/** The stored pool record and how the API shows it. */
import type { PoolInfo } from '../../sdk/index.js';

/** Pools are server-wide: every record lives under this store project. */
export const POOL_PROJECT = '';

/** Where one cluster member stands with a pool: defined (`Pending`), made on its disk, or failed there. */
export type MemberPoolState = 'Pending' | 'Created' | 'Errored';

export interface MemberPart {
  /** The member-specific keys (MEMBER_KEYS) of this member's part of the pool. */
  config: Record<string, string>;
  state: MemberPoolState;
  /** Why the member's part could not be made (state `Errored`). */
  error?: string;
}

export interface PoolRecord {
  name: string;
  driver: string;
  description: string;
  /** Standalone: every key. In a cluster: the keys shared by all members (no MEMBER_KEYS). */
  config: Record<string, string>;
  /** In a cluster only: each member's part, by member name. */
  members?: Record<string, MemberPart>;
  /**
   * In a cluster only: false while the pool is only defined member by member (`--target`); true once
   * the cluster-wide create was asked, which tells each member to make its part.
   */
  created?: boolean;
  /** In a cluster only: a cluster-wide delete was asked; each member removes its part and its entry. */
  deleting?: boolean;
}

/** Status as the API shows it: the reference's per-cluster states, and `Unavailable` when it could not be mounted here. */
export type PoolStatus = 'Created' | 'Unavailable' | 'Pending' | 'Errored';

/** Keys whose value may differ between members (a disk, a directory, a size), as the reference has them. */
export const MEMBER_KEYS: readonly string[] = ['source', 'size', 'zfs.pool_name', 'lvm.thinpool_name', 'lvm.vg_name', 'volatile.initial_source'];

export const isMemberKey = (key: string) => MEMBER_KEYS.includes(key);

export const poolUrl = (name: string) => `/1.0/storage-pools/${encodeURIComponent(name)}`;

/** What PUT replaces and the ETag is computed from. */
export const editableView = (pool: PoolRecord) => ({ config: pool.config, description: pool.description });

/** Field order as the reference answers. `locations`: the members holding a part ("none" standalone). */
export function poolView(pool: PoolRecord, status: PoolStatus, usedBy: string[], config = pool.config) {
  return {
    config,
    description: pool.description,
    name: pool.name,
    driver: pool.driver,
    used_by: usedBy,
    status,
    locations: pool.members ? Object.keys(pool.members).sort() : ['none'],
  };
}

/** The pool as `member`'s driver sees it: the shared keys and that member's own. */
export const poolInfo = (pool: PoolRecord, member?: string): PoolInfo => ({
  name: pool.name,
  driver: pool.driver,
  config: { ...pool.config, ...(member !== undefined ? pool.members?.[member]?.config : undefined) },
});

/** The pool's state across the cluster: pending until created everywhere, errored when a member failed. */
export function clusterStatus(pool: PoolRecord): PoolStatus {
  const parts = Object.values(pool.members ?? {});
  if (!pool.created || parts.some((p) => p.state === 'Pending')) return 'Pending';
  return parts.some((p) => p.state === 'Errored') ? 'Errored' : 'Created';
}

/** Split a standalone record when its server becomes the first member: its member keys become `member`'s part. */
export function splitForCluster(pool: PoolRecord, member: string): PoolRecord {
  const shared: Record<string, string> = {};
  const own: Record<string, string> = {};
  for (const [key, value] of Object.entries(pool.config)) (isMemberKey(key) ? own : shared)[key] = value;
  return { ...pool, config: shared, members: { [member]: { config: own, state: 'Created' } }, created: true };
}
