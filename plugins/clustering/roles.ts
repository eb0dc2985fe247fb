/**
 * Database roles from the etcd membership: a voter is `database` (and `database-leader` when it leads),
 * the first `cluster.max_standby` learners are `database-standby`. The member an etcd member belongs to
 * is found by its name or, after a rename, by the host of its peer URL (etcd names never change).
 */
import type { ClusterControl, EtcdMemberStatus } from '../../sdk/index.js';
import { splitAddress } from './address.js';
import { DatabaseRole, type MemberRecord } from './member.js';

const hostOf = (url: string): string => {
  try {
    return new URL(url).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return '';
  }
};

/** The etcd member of each cluster member (by name). */
export function etcdMemberOf(records: MemberRecord[], etcd: EtcdMemberStatus[]): Map<string, EtcdMemberStatus> {
  const out = new Map<string, EtcdMemberStatus>();
  for (const record of records) {
    const host = splitAddress(record.address)?.host;
    const found = etcd.find((e) => e.name === record.name) ?? etcd.find((e) => host !== undefined && hostOf(e.peerUrl) === host);
    if (found) out.set(record.name, found);
  }
  return out;
}

/** Roles by member name; members are taken in join order so the same learners stay standbys. */
export function databaseRoles(records: MemberRecord[], etcd: EtcdMemberStatus[], maxStandby: number): Map<string, string[]> {
  const byMember = etcdMemberOf(records, etcd);
  const roles = new Map<string, string[]>();
  let standbys = 0;
  for (const record of [...records].sort((a, b) => a.joined_at.localeCompare(b.joined_at))) {
    const e = byMember.get(record.name);
    if (!e) roles.set(record.name, []);
    else if (!e.learner) roles.set(record.name, e.leader ? [DatabaseRole.leader, DatabaseRole.voter] : [DatabaseRole.voter]);
    else if (standbys < maxStandby) {
      standbys += 1;
      roles.set(record.name, [DatabaseRole.standby]);
    } else roles.set(record.name, []);
  }
  return roles;
}

/**
 * Promote online learners to voters, oldest first, up to `maxVoters` and only to an odd number of
 * voters: an even count tolerates no more failures than the odd count below it and needs a larger
 * quorum (two members are one voter and one standby, as in the reference). A learner etcd has not
 * caught up yet refuses; it is tried again at the next round. Returns who was promoted.
 */
export async function promoteLearners(control: ClusterControl, records: MemberRecord[], etcd: EtcdMemberStatus[], maxVoters: number, isOnline: (name: string) => boolean): Promise<string[]> {
  const voters = etcd.filter((e) => !e.learner).length;
  const byMember = etcdMemberOf(records, etcd);
  const candidates = [...records]
    .sort((a, b) => a.joined_at.localeCompare(b.joined_at))
    .filter((r) => byMember.get(r.name)?.learner && isOnline(r.name));
  let target = Math.min(maxVoters, voters + candidates.length);
  if (target % 2 === 0) target -= 1;
  const promoted: string[] = [];
  for (const record of candidates) {
    if (voters + promoted.length >= target) break;
    try {
      await control.promoteEtcdMember(byMember.get(record.name)!.id);
    } catch {
      // Not caught up yet: the next round tries again.
      break;
    }
    promoted.push(record.name);
  }
  return promoted;
}

/**
 * The voter to demote, if there are more voters than wanted: wanted is `maxVoters`, and always odd (two
 * voters stop together when either is lost; one voter and a standby do not). etcd 3.4 keeps one learner
 * at most, so nothing is demoted while there is one. The leader's own member is kept (it would have to
 * hand over leadership first); of the others, an online one, newest first.
 */
export function voterToDemote(records: MemberRecord[], etcd: EtcdMemberStatus[], maxVoters: number, self: string, isOnline: (name: string) => boolean): string | undefined {
  if (etcd.some((e) => e.learner)) return undefined;
  const voters = etcd.filter((e) => !e.learner).length;
  let wanted = Math.min(maxVoters, voters);
  if (wanted % 2 === 0) wanted -= 1;
  if (voters <= wanted || wanted < 1) return undefined;
  const byMember = etcdMemberOf(records, etcd);
  return [...records]
    .sort((a, b) => b.joined_at.localeCompare(a.joined_at))
    .find((r) => r.name !== self && byMember.get(r.name) && !byMember.get(r.name)!.learner && !byMember.get(r.name)!.leader && isOnline(r.name))?.name;
}
