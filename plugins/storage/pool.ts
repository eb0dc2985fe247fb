/** The stored pool record and how the API shows it. */
import type { PoolInfo } from '../../sdk/index.js';

/** Pools are server-wide: every record lives under this store project. */
export const POOL_PROJECT = '';

export interface PoolRecord {
  name: string;
  driver: string;
  description: string;
  config: Record<string, string>;
}

export type PoolStatus = 'Created' | 'Unavailable';

export const poolUrl = (name: string) => `/1.0/storage-pools/${encodeURIComponent(name)}`;

/** What PUT replaces and the ETag is computed from. */
export const editableView = (pool: PoolRecord) => ({ config: pool.config, description: pool.description });

/** Field order as the reference answers. */
export function poolView(pool: PoolRecord, status: PoolStatus, usedBy: string[]) {
  return {
    config: pool.config,
    description: pool.description,
    name: pool.name,
    driver: pool.driver,
    used_by: usedBy,
    status,
    locations: ['none'],
  };
}

export const poolInfo = (pool: PoolRecord): PoolInfo => ({ name: pool.name, driver: pool.driver, config: { ...pool.config } });
