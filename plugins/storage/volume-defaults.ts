/**
 * Pool keys `volume.<key>`: the value a new volume of the pool takes for `<key>` when its own
 * config leaves it out. Which keys carry over depends on the kind of volume, as in the reference:
 * custom volumes take every default that applies to them; instance and image volumes take the
 * snapshot keys only (their size comes from the root disk device, not from the volume).
 */
import { isBool, type ConfigKeyDescriptor } from '../../sdk/index.js';
import { validateExpiry } from '../../sdk/lib/snapshots/expiry.js';
import { validateSnapshotPattern } from '../../sdk/lib/snapshots/pattern.js';
import { validateSchedule } from '../../sdk/lib/snapshots/schedule.js';

export type NewVolumeKind = 'custom-filesystem' | 'custom-block' | 'instance' | 'image';

const SNAPSHOT_KEYS = ['snapshots.expiry', 'snapshots.schedule', 'snapshots.pattern'];

const TAKES: Record<NewVolumeKind, string[]> = {
  'custom-filesystem': ['size', ...SNAPSHOT_KEYS, 'security.shifted', 'security.unmapped'],
  'custom-block': ['size', ...SNAPSHOT_KEYS],
  instance: SNAPSHOT_KEYS,
  image: SNAPSHOT_KEYS,
};

/** `config` completed with the pool's defaults for a volume of `kind` (a new object). */
export function withPoolDefaults(poolConfig: Record<string, string>, kind: NewVolumeKind, config: Record<string, string> = {}): Record<string, string> {
  const out = { ...config };
  for (const key of TAKES[kind]) {
    const value = poolConfig[`volume.${key}`];
    if (value && out[key] === undefined) out[key] = value;
  }
  return out;
}

/** The pool keys of these defaults (`volume.size` is among the family's pool keys already). */
export const POOL_DEFAULT_KEYS: ConfigKeyDescriptor[] = [
  {
    key: 'volume.snapshots.expiry', scope: 'pool', type: 'string', validate: validateExpiry, extension: 'custom_volume_snapshot_expiry',
    doc: 'Default `snapshots.expiry` of new volumes on this pool',
  },
  {
    key: 'volume.snapshots.schedule', scope: 'pool', type: 'string', validate: validateSchedule(false), extension: 'volume_snapshot_scheduling',
    doc: 'Default `snapshots.schedule` of new volumes on this pool',
  },
  {
    key: 'volume.snapshots.pattern', scope: 'pool', type: 'string', validate: validateSnapshotPattern, extension: 'volume_snapshot_scheduling',
    doc: 'Default `snapshots.pattern` of new volumes on this pool',
  },
  {
    key: 'volume.security.shifted', scope: 'pool', type: 'bool', validate: isBool, extension: 'storage_shifted',
    doc: 'Default `security.shifted` of new custom filesystem volumes on this pool',
  },
  {
    key: 'volume.security.unmapped', scope: 'pool', type: 'bool', validate: isBool, extension: 'storage_unmapped',
    doc: 'Default `security.unmapped` of new custom filesystem volumes on this pool',
  },
];
