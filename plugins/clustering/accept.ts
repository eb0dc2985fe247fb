/**
 * The member's side of a join (`/internal/cluster/accept`): the joiner proves it holds a valid token
 * for its name; the member records it and adds its etcd member as a learner (a voter added before its
 * etcd runs would cost the cluster its quorum; the leader promotes it once it caught up), and answers
 * the cluster certificate pair and the etcd peers. A failed etcd step takes the record back and
 * restores the token.
 */
import { ApiError, conflict, forbidden, type ClusterControl, type Collection } from '../../sdk/index.js';
import { canonicalAddress, isWildcard, splitAddress } from './address.js';
import { currentCertificate, requireClustered, requireControl, type Clustering } from './context.js';
import { nameOrRefusal } from './enable.js';
import { TOKENS_COLLECTION, type TokenRecord } from './join-token.js';
import type { AcceptAnswer, AcceptRequest } from './join.js';
import { MEMBERS_COLLECTION } from './membership.js';
import type { MemberRecord } from './member.js';
import { etcdMemberOf } from './roles.js';

export async function acceptMember(c: Clustering, body: AcceptRequest): Promise<AcceptAnswer> {
  requireClustered(c);
  const control = requireControl(c);
  const name = nameOrRefusal(body.server_name);
  const found = await c.tokens.find(name, body.secret);
  if ('refused' in found) throw forbidden(found.refused);
  const address = canonicalAddress(body.address);
  if (!address || isWildcard(address)) throw new ApiError(400, `Invalid member address "${body.address}"`);
  const members = await c.membership.list();
  if (members.some((m) => m.name === name)) throw conflict(`The cluster already has a member with name: ${name}`);
  const host = splitAddress(address)!.host;
  if (members.some((m) => m.address === address || splitAddress(m.address)?.host === host)) throw conflict(`The cluster already has a member with address: ${address}`);

  const record: MemberRecord = {
    name,
    address,
    description: '',
    failure_domain: 'default',
    architecture: typeof body.architecture === 'string' && body.architecture ? body.architecture : 'unknown',
    config: {},
    roles: [],
    state: 'normal',
    joined_at: new Date().toISOString(),
  };
  // The token is used up and the member recorded in one step: two joiners with one token cannot both pass.
  await c.store.transaction(async (tx) => {
    await tx.collection<TokenRecord>(TOKENS_COLLECTION).delete('', name, found.rev);
    await tx.collection<MemberRecord>(MEMBERS_COLLECTION).put('', name, record, 0);
  }).catch((err: ApiError) => {
    if (err.status === 412 || err.status === 409) throw forbidden(`The join token for member "${name}" was used or replaced meanwhile`);
    throw err;
  });
  let added: { initialCluster: string; memberId: string };
  try {
    added = await control.addEtcdMember(control.etcdUrlsFor(name, address), true);
  } catch (err) {
    await c.store.transaction(async (tx) => {
      await tx.collection<MemberRecord>(MEMBERS_COLLECTION).delete('', name);
      await tx.collection<TokenRecord>(TOKENS_COLLECTION).put('', name, found.record, 0);
    }).catch((e: Error) => c.log.error({ err: e, member: name }, 'could not undo the record of a member whose etcd member was not added'));
    throw new ApiError(503, `Could not add the etcd member of "${name}": ${(err as Error).message}`);
  }
  const pair = currentCertificate(control);
  return { cluster_certificate: pair.cert, cluster_key: pair.key, initial_cluster: added.initialCluster, member_id: added.memberId };
}

/** Take a member out: its record, then its etcd member (the record comes back when etcd refuses). */
export async function dropMember(c: Clustering, control: ClusterControl, records: Collection<MemberRecord>, name: string): Promise<void> {
  const stored = await records.get('', name);
  if (!stored) return;
  const etcd = etcdMemberOf([stored.doc], await control.etcdMembers()).get(name);
  await records.delete('', name, stored.rev);
  if (!etcd) return;
  try {
    await control.removeEtcdMember(etcd.id);
  } catch (err) {
    await records.put('', name, stored.doc, 0).catch((e: Error) => c.log.error({ err: e, member: name }, 'could not restore the record of a member etcd kept'));
    throw new ApiError(503, `Could not remove the etcd member of "${name}": ${(err as Error).message}`);
  }
}
