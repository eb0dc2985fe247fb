/** Pool config keys every driver shares (scope `pool`); drivers add theirs through `configKeys`. */
import { badRequest, isBool, type ConfigKeyDescriptor } from '../../sdk/index.js';

const SIZE = /^\d+(\.\d+)?\s*([kKMGTPE]i?B|B)?$/;

export const isSize = (value: string): void => {
  if (!SIZE.test(value)) throw new Error(`Invalid size "${value}" (use bytes or a unit such as 10GiB or 500MB)`);
};

export const POOL_KEYS: ConfigKeyDescriptor[] = [
  {
    key: 'source', scope: 'pool', type: 'string', extension: 'storage',
    doc: 'Where the pool lives on the host (its meaning is the driver\'s: a directory for dir). Fixed once the pool exists.',
  },
  {
    key: 'volume.size', scope: 'pool', type: 'string', extension: 'storage', validate: isSize,
    doc: 'Default size of new volumes on this pool.',
  },
  {
    key: 'rsync.bwlimit', scope: 'pool', type: 'string', extension: 'storage_rsync_bwlimit', default: '0',
    validate: (value) => {
      if (!BWLIMIT.test(value)) throw new Error(`Invalid rsync.bwlimit "${value}" (a rate such as 512K, 10MB or 1.5m per second; 0 for none)`);
    },
    doc: 'Upper limit on the rate of rsync transfers that send from this pool (migrations), as rsync\'s --bwlimit takes it (KiB/s without a unit); 0 for none.',
  },
  {
    key: 'rsync.compression', scope: 'pool', type: 'bool', extension: 'storage_rsync_compression', default: 'true', validate: isBool,
    doc: 'Whether rsync transfers from or into this pool (migrations) compress what they send.',
  },
];

/** What rsync's --bwlimit takes: a rate in KiB/s, or with a unit (1.5m, 10MB, 512KiB). */
const BWLIMIT = /^\d+(\.\d+)?([KMGTPkmgtp]([iI]?[bB])?)?$/;

/** Keys that only make sense when a pool is created. */
export const FIXED_KEYS = ['source'];

/**
 * An edit's config with the fixed keys as `stored` has them: clients that send the config without a fixed
 * key (or with '') mean to keep it, not to unset it; another value is refused.
 */
export function keepFixedKeys(config: Record<string, string>, stored: Record<string, string>): Record<string, string> {
  const kept = { ...config };
  for (const key of FIXED_KEYS) {
    if (!(key in kept) || kept[key] === '') {
      if (stored[key] !== undefined) kept[key] = stored[key];
      else delete kept[key];
    } else if (kept[key] !== stored[key]) {
      throw badRequest(`The "${key}" of a storage pool cannot be changed once it is created`);
    }
  }
  return kept;
}
