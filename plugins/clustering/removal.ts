/**
 * `DELETE /1.0/cluster/members/<name>`: the member leaves the cluster's records and etcd, then is told
 * to leave (stop and wipe its etcd member, go back to a fresh standalone store). An offline member is
 * removed only with `force`, and then is not told anything: it is expected never to come back as is.
 */
import { badRequest, InstanceEvacuationRef, notFound, type ApiRequest } from '../../sdk/index.js';
import { currentCertificate, requireClustered, requireControl, type Clustering } from './context.js';
import { dropMember } from './accept.js';
import { memberUrl } from './member.js';
import { fingerprintOf, peerRequest } from './peer.js';

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

  await dropMember(c, control, c.membership.records, name);
  if (held.length) await instances?.forgetMember(name);
  c.events.lifecycle('cluster-member-removed', memberUrl(name), { requestor: req.requestor });
  if (self) {
    // Answer first: leaving switches this daemon's store away under the request.
    setImmediate(() => void leaveCluster(c).catch((err: Error) => c.log.error({ err }, 'leaving the cluster failed')));
    return;
  }
  if (!online) return;
  const pair = currentCertificate(control);
  await peerRequest({ address: record.address, fingerprint: fingerprintOf(pair.cert), method: 'POST', path: '/internal/cluster/leave', body: {}, client: pair })
    .then((res) => {
      if (res.status !== 200) c.log.warn({ member: name, status: res.status, error: res.body?.error }, 'the removed member refused to leave');
    })
    .catch((err: Error) => c.log.warn({ err, member: name }, 'the removed member could not be told to leave'));
}

/** This member was removed: stop its lease and etcd, back to standalone. */
export async function leaveCluster(c: Clustering): Promise<void> {
  const control = requireControl(c);
  await c.membership.stop();
  await control.leave();
  c.ownAddress = undefined;
  c.log.info('left the cluster: standalone again');
}
