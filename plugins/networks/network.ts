/** The stored network record and how the API shows managed and unmanaged networks. */
import type { NetworkInfo } from '../../sdk/index.js';
import { memberConfig, type MemberPartsRecord } from '../../sdk/lib/cluster/index.js';

/** Standalone `config` holds every key; in a cluster the shared ones, each member's own in `members`. */
export interface NetworkRecord extends MemberPartsRecord {
  name: string;
  type: string;
  description: string;
  config: Record<string, string>;
}

export type NetworkStatus = 'Created' | 'Unavailable' | 'Pending' | 'Errored';

/** Keys whose value may differ between cluster members (an uplink), as the reference has them. */
export const MEMBER_KEYS: readonly string[] = ['bridge.external_interfaces', 'parent'];

export const isMemberKey = (key: string) => MEMBER_KEYS.includes(key);

/** The network as `member`'s host uses it (undefined standalone). */
export const networkInfo = (project: string, rec: NetworkRecord, member?: string): NetworkInfo => ({
  project, name: rec.name, type: rec.type, description: rec.description, config: memberConfig(rec, member),
});

/** What PUT replaces and the ETag is computed from. */
export const editableView = (rec: NetworkRecord) => ({ config: rec.config, description: rec.description });

/** Field order as the reference answers. */
export function managedView(rec: NetworkRecord, status: NetworkStatus, usedBy: string[], config = rec.config) {
  return {
    config,
    description: rec.description,
    name: rec.name,
    type: rec.type,
    used_by: usedBy,
    managed: true,
    status,
    locations: rec.members ? Object.keys(rec.members).sort() : ['none'],
  };
}

export function unmanagedView(name: string, type: string, usedBy: string[]) {
  return { config: {}, description: '', name, type, used_by: usedBy, managed: false, status: '', locations: null };
}
