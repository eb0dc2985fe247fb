/** Instance config keys for scheduled snapshots and their expiry. */
import { isBool, type ConfigKeyDescriptor } from '../../../sdk/index.js';
import { validateSchedule } from '../../../sdk/lib/snapshots/schedule.js';
import { validateExpiry } from '../../../sdk/lib/snapshots/expiry.js';
import { DEFAULT_SNAPSHOT_PATTERN, validateSnapshotPattern } from '../../../sdk/lib/snapshots/pattern.js';

export const SNAPSHOT_KEYS: ConfigKeyDescriptor[] = [
  {
    key: 'snapshots.schedule', scope: 'instance', type: 'string', default: '', validate: validateSchedule(true), live: true,
    // The aliases, @startup included, came later with snapshots_schedule_aliases; the key itself with snapshot_scheduling.
    extension: 'snapshot_scheduling',
    doc: 'When to take snapshots: 5-field cron expressions and/or aliases (@hourly, @daily, @midnight, @weekly, @monthly, @annually, @yearly, @never, @startup; the first ones at a minute and hour picked per instance), separated by ", "',
  },
  {
    key: 'snapshots.schedule.stopped', scope: 'instance', type: 'bool', default: 'false', validate: isBool, live: true,
    extension: 'snapshot_scheduling', doc: 'Also take scheduled snapshots while the instance is stopped',
  },
  {
    key: 'snapshots.pattern', scope: 'instance', type: 'string', default: DEFAULT_SNAPSHOT_PATTERN, validate: validateSnapshotPattern, live: true,
    extension: 'snapshot_scheduling',
    doc: "Name of new snapshots: %d is replaced by the next free index; {{ creation_date|date:'2006-01-02' }} by the creation time",
  },
  {
    key: 'snapshots.expiry', scope: 'instance', type: 'string', default: '', validate: validateExpiry, live: true,
    extension: 'snapshot_expiry',
    doc: 'When new snapshots expire, e.g. "1M 2H 3d 4w 5m 6y" (minutes, hours, days, weeks, months, years); empty means never',
  },
];
