/** Pool config keys every driver shares (scope `pool`); drivers add theirs through `configKeys`. */
import type { ConfigKeyDescriptor } from '../../sdk/index.js';

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
];

/** Keys that only make sense when a pool is created. */
export const FIXED_KEYS = ['source'];
