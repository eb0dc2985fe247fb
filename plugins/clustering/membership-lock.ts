/**
 * Changes of the etcd membership take one cluster-wide lock: a join's learner added in the middle of a
 * demotion (the member out of etcd, about to be added back) left the joiner's etcd refusing to start
 * and the demoted member unable to come back, since etcd keeps one learner at most. Joins, removals and
 * demotions run one at a time; whichever comes second waits for the first (bounded).
 */
import type { ClusterControl } from '../../sdk/index.js';

const MEMBERSHIP_LOCK = 'membership';
/** How long a join or a removal waits for another change; a demotion bounded by its own steps ends well within it. */
export const MEMBERSHIP_WAIT_MS = 20_000;

export function oneMembershipChange<T>(control: ClusterControl, holder: string, fn: () => Promise<T>, waitMs = MEMBERSHIP_WAIT_MS): Promise<T> {
  return control.exclusively(MEMBERSHIP_LOCK, holder, fn, { waitMs });
}
