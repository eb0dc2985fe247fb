/**
 * Demoting a voter (decision 0062): the etcd leader's member decides (membership rounds) and asks the
 * member to demote itself at `/internal/cluster/demote`, since only that member can stop, wipe and
 * restart its own etcd. The member does it through ClusterControl.rejoinAsLearner, bounded.
 */
import { ApiError, type ClusterControl } from '../../sdk/index.js';
import { currentCertificate, requireClustered, requireControl, type Clustering } from './context.js';
import type { MemberRecord } from './member.js';
import { fingerprintOf, peerRequest } from './peer.js';

/** Past the demotion's own bounds (a removal and an add-back of up to 10 s each, and etcd's start). */
const DEMOTION_ANSWER_MS = 45_000;

/** On the leader's member: ask `member` to demote itself (the answer comes once it is a standby). */
export async function askToDemote(control: ClusterControl, member: MemberRecord): Promise<void> {
  const pair = currentCertificate(control);
  const res = await peerRequest({ address: member.address, fingerprint: fingerprintOf(pair.cert), method: 'POST', path: '/internal/cluster/demote', body: {}, client: pair, timeoutMs: DEMOTION_ANSWER_MS });
  if (res.status !== 200) throw new ApiError(res.status === 409 ? 409 : 503, `Member "${member.name}" could not be demoted: ${res.body?.error ?? `answered ${res.status}`}`);
}

/** On the member asked: demote its own database member. */
export async function demoteSelf(c: Clustering): Promise<void> {
  requireClustered(c);
  await requireControl(c).rejoinAsLearner();
  void c.membership.publish();
}
