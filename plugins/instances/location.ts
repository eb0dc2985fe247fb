/**
 * Which cluster member an instance lives on. The record's `location` names it; on a standalone
 * server every instance is this server's ("none", as the reference shows it). Records older than
 * clustering have no location: when this server becomes (or boots as) a cluster member, it claims
 * those whose volume it holds (location-claim.ts), so every record in the shared store names its member.
 */
import type { ClusterView } from '../../sdk/index.js';
import type { InstanceRecord } from './record.js';

/** What a standalone server calls itself, and the `location` of everything on it. */
export const STANDALONE_LOCATION = 'none';

export const unplaced = (record: InstanceRecord): boolean => !record.location || record.location === STANDALONE_LOCATION;

/** The `location` the API shows for the instance. */
export function locationOf(cluster: ClusterView, record: InstanceRecord): string {
  if (!cluster.enabled) return STANDALONE_LOCATION;
  return unplaced(record) ? cluster.serverName : record.location!;
}

/**
 * Whether this server holds (runs, starts at boot, snapshots on schedule, backs up) the instance. In a
 * cluster an unplaced record is nobody's until the member with its volume claims it.
 */
export function isHere(cluster: ClusterView, record: InstanceRecord): boolean {
  return !cluster.enabled || record.location === cluster.serverName;
}

/** The member another member's request about this instance must go to; undefined when it is this one (or unknown). */
export function remoteLocation(cluster: ClusterView, record: InstanceRecord | undefined): string | undefined {
  if (!record || !cluster.enabled || unplaced(record) || record.location === cluster.serverName) return undefined;
  return record.location;
}
