/**
 * `DELETE /1.0/cluster/members/<name>`: the member leaves the cluster's records, is told to leave (it
 * takes its etcd member out itself, stops and wipes it, and goes back to a fresh standalone store), and
 * its etcd member is taken out here if it did not. An offline member is removed only with `force`, and
 * then is not told anything: it is expected never to come back as is.
 */
import { badRequest, InstanceEvacuationRef, notFound, type ApiRequest, type ClusterControl } from '../../sdk/index.js';
import { currentCertificate, requireClustered, requireControl, type Clustering } from './context.js';
import { dropMember } from './accept.js';
import { memberUrl, type MemberRecord } from './member.js';
import { oneMembershipChange } from './membership-lock.js';
import { etcdMemberOf } from './roles.js';
import { fingerprintOf, peerRequest } from './peer.js';

/** How long a removed member may take to leave by itself (its etcd member out) before it is taken out here. */
const LEAVE_BOUND_MS = 15_000;

export async function removeMember(c: Clustering, req: ApiRequest, name: string, force: boolean): Promise<void> {
  requireClustered(c);
  const control = requireControl(c);
  const members = await c.membership.list();
  const record = members.find((m) => m.name === name);
  if (!record) throw notFound('Cluster member not found');
  if (members.length === 1) throw badRequest('Member is the only member in the cluster');
  const self = name === c.cluster.serverName;
  const online = self || c.membership.health.isOnline(name);
  if (!online && !force) throw badRequest(`Member "${name}" is offline: remove it with force (lxc cluster remove --force) if it is not coming back`);
  // Its instances live on its disks: move them away first (lxc move --target, or evacuate), or force.
  const instances = c.services.get(InstanceEvacuationRef);
  const held = (await instances?.instancesOn(name)) ?? [];
  if (held.length && !force) throw badRequest(`Member "${name}" still holds instances: ${held.join(', ')} (move or delete them first, or remove with force)`);

  await oneMembershipChange(control, `removing member ${name}`, () =>
    dropMember(c, control, c.membership.records, name, online && !self ? (gone) => toldToLeave(c, control, gone) : undefined));
  if (held.length) await instances?.forgetMember(name);
  c.events.lifecycle('cluster-member-removed', memberUrl(name), { requestor: req.requestor });
  if (self) {
    // Answer first: leaving switches this daemon's store away under the request.
    setImmediate(() => void leaveCluster(c).catch((err: Error) => c.log.error({ err }, 'leaving the cluster failed')));
  }
}

/**
 * Tell a removed member to leave, and wait (bounded) until its etcd member is gone (true then). Told
 * before its etcd member is taken out, it can still read the cluster database to check it was removed,
 * and it takes itself out of etcd; taken out first, its etcd stops and nothing it asks is answered any more.
 */
async function toldToLeave(c: Clustering, control: ClusterControl, record: MemberRecord): Promise<boolean> {
  const pair = currentCertificate(control);
  const res = await peerRequest({ address: record.address, fingerprint: fingerprintOf(pair.cert), method: 'POST', path: '/internal/cluster/leave', body: {}, client: pair });
  if (res.status !== 200) throw new Error(`it answered ${res.status}: ${res.body?.error ?? ''}`);
  const giveUp = Date.now() + LEAVE_BOUND_MS;
  while (etcdMemberOf([record], await control.etcdMembers()).has(record.name)) {
    if (Date.now() > giveUp) throw new Error(`its database member was still there after ${LEAVE_BOUND_MS / 1000} s`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return true;
}

/** This member was removed: stop its lease and etcd, back to standalone. */
export async function leaveCluster(c: Clustering): Promise<void> {
  const control = requireControl(c);
  await c.membership.stop();
  await control.leave();
  c.ownAddress = undefined;
  c.log.info('left the cluster: standalone again');
}
