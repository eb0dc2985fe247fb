/** The stored pool record and how the API shows it. */
import type { PoolInfo } from '../../sdk/index.js';
import { memberConfig, type MemberPartsRecord } from '../../sdk/lib/cluster/index.js';

/** Pools are server-wide: every record lives under this store project. */
export const POOL_PROJECT = '';

export interface PoolRecord extends MemberPartsRecord {
  name: string;
  driver: string;
  description: string;
  /** Standalone: every key. In a cluster: the keys shared by all members (no MEMBER_KEYS). */
  config: Record<string, string>;
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
  config: memberConfig(pool, member),
});

/** The keys whose value differs from `before` to `after`, with their new value ('' for a key unset). */
export function changedKeys(before: Record<string, string>, after: Record<string, string>): Record<string, string> {
  const changed: Record<string, string> = {};
  for (const key of new Set([...Object.keys(before), ...Object.keys(after)])) {
    if (before[key] !== after[key]) changed[key] = after[key] ?? '';
  }
  return changed;
}
