/** Config keys of custom volumes (scope `volume`); `user.*` passes the registry on its own. */
import { isBool, parseSize, type ConfigKeyDescriptor } from '../../../sdk/index.js';
import { validateExpiry } from '../../../sdk/lib/snapshots/expiry.js';
import { DEFAULT_SNAPSHOT_PATTERN, validateSnapshotPattern } from '../../../sdk/lib/snapshots/pattern.js';
import { validateSchedule } from '../../../sdk/lib/snapshots/schedule.js';

export const isVolumeSize = (value: string): void => {
  parseSize(value);
};

export const VOLUME_KEYS: ConfigKeyDescriptor[] = [
  {
    key: 'size', scope: 'volume', type: 'string', validate: isVolumeSize, extension: 'storage',
    doc: 'Size of the volume (a quota where the driver has one; a block volume\'s file size)',
  },
  {
    key: 'security.shifted', scope: 'volume', type: 'bool', default: 'false', validate: isBool, extension: 'storage_shifted',
    doc: 'Mount the volume with an idmapped mount so that several isolated instances can share it',
  },
  {
    key: 'security.shared', scope: 'volume', type: 'bool', default: 'false', validate: isBool, extension: 'custom_block_volumes',
    doc: 'Let several running virtual machines use the block volume at once (their guests must coordinate their writes)',
  },
  {
    key: 'security.unmapped', scope: 'volume', type: 'bool', default: 'false', validate: isBool, extension: 'storage_unmapped',
    doc: 'Leave the volume\'s ownership unmapped (host ids) when it is attached',
  },
  {
    key: 'snapshots.expiry', scope: 'volume', type: 'string', default: '', validate: validateExpiry, extension: 'custom_volume_snapshot_expiry',
    doc: 'When new snapshots of the volume expire, e.g. "1d 2w"; empty means never',
  },
  {
    key: 'snapshots.schedule', scope: 'volume', type: 'string', default: '', validate: validateSchedule(false), extension: 'volume_snapshot_scheduling',
    doc: 'When to take snapshots of the volume: cron expressions and/or aliases (@hourly, @daily, ...), separated by ", "',
  },
  {
    key: 'snapshots.pattern', scope: 'volume', type: 'string', default: DEFAULT_SNAPSHOT_PATTERN, validate: validateSnapshotPattern,
    extension: 'volume_snapshot_scheduling', doc: 'Name of scheduled snapshots of the volume (%d: the next free index)',
  },
];
