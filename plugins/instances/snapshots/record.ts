/**
 * The stored form of an instance snapshot: the instance's config at the time it was taken, in
 * the `snapshots` collection under the key `<instance>/<snapshot>` (project as the instance's).
 */
import type { DeviceConfig } from '../../../sdk/index.js';

export interface SnapshotRecord {
  /** The snapshot's own name (without the instance part). */
  name: string;
  architecture: string;
  config: Record<string, string>;
  devices: Record<string, DeviceConfig>;
  ephemeral: boolean;
  profiles: string[];
  stateful: boolean;
  description: string;
  created_at: string;
  /** `0001-01-01T00:00:00Z` when it never expires. */
  expires_at: string;
  last_used_at: string;
}

export const NO_EXPIRY = '0001-01-01T00:00:00Z';

export const snapshotKey = (instance: string, snapshot: string) => `${instance}/${snapshot}`;

export const hasExpiry = (expiresAt: string | undefined) => !!expiresAt && expiresAt !== NO_EXPIRY && !expiresAt.startsWith('0001-');
