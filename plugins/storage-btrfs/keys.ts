/** Pool config keys of the btrfs driver (scope `pool`; the family refuses them on other drivers' pools). */
import { parseSize, type ConfigKeyDescriptor } from '../../sdk/index.js';

export const BTRFS_KEYS: ConfigKeyDescriptor[] = [
  {
    key: 'size', scope: 'pool', type: 'string', extension: 'storage',
    validate: (value) => {
      parseSize(value);
    },
    doc: 'Size of the loop file of a pool without `source` (default: a fifth of the disk, between 5 and 30 GiB). Fixed once the pool exists.',
  },
  {
    key: 'btrfs.mount_options', scope: 'pool', type: 'string', extension: 'storage_btrfs_mount_options',
    doc: 'Mount options of the pool\'s file system (default user_subvol_rm_allowed). Applied at the next mount.',
  },
];
