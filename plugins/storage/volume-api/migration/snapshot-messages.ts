/**
 * Volume snapshots in the migration header. The header's snapshot message was made for instances:
 * a volume's snapshot fills its name, its config (as `localConfig`) and its dates, and leaves the
 * instance fields empty (architecture 0, no profiles or devices), as the reference's peers do. The
 * header has no description: a received snapshot takes the new volume's, as the reference gives it.
 */
import type { SnapshotMessage } from '../../../../sdk/lib/migration/index.js';
import type { VolumeSnapshotRecord } from '../record.js';

const seconds = (iso: string) => (iso && !iso.startsWith('0001-') ? Math.floor(Date.parse(iso) / 1000) : 0);
const toIso = (secs: number | undefined) => (secs && secs > 0 ? new Date(secs * 1000).toISOString().replace('.000Z', 'Z') : undefined);

export function volumeSnapshotMessage(snap: VolumeSnapshotRecord): SnapshotMessage {
  return {
    name: snap.name,
    localConfig: Object.entries(snap.config).map(([key, value]) => ({ key, value })),
    profiles: [],
    ephemeral: false,
    localDevices: [],
    architecture: 0,
    stateful: false,
    creation_date: seconds(snap.createdAt),
    last_used_date: 0,
    expiry_date: seconds(snap.expiresAt),
  };
}

/** What a received snapshot's record takes from its message (the name was checked with the header). */
export function receivedSnapshot(msg: SnapshotMessage | undefined, name: string, description: string): { name: string; description: string; config: Record<string, string>; createdAt?: string; expiresAt: string } {
  const config: Record<string, string> = {};
  for (const pair of msg?.localConfig ?? []) {
    // The source's volatile keys describe its own disk, not ours.
    if (typeof pair.key === 'string' && typeof pair.value === 'string' && !pair.key.startsWith('volatile.')) config[pair.key] = pair.value;
  }
  return { name, description, config, createdAt: toIso(msg?.creation_date), expiresAt: toIso(msg?.expiry_date) ?? '' };
}
