/**
 * Joins that were accepted but never started: the accepting member added the joiner's etcd member as a
 * learner, and the joiner vanished before its etcd connected (crashed, cut off, its undo lost). etcd
 * keeps such a member forever and, holding at most one learner, then refuses every later join. The
 * leader's rounds take it out once it stayed unstarted longer than any join could take, with its
 * record when that member never came online.
 */
import type Logger from 'bunyan';
import type { ClusterControl, Collection, EtcdMemberStatus } from '../../sdk/index.js';
import type { MemberRecord } from './member.js';
import { etcdMemberOf } from './roles.js';

/** Longer than a joiner's etcd may take to start (20 s) plus its store switch. */
export const ABANDONED_AFTER_MS = 30_000;

export class AbandonedJoins {
  /** When this member first saw each unstarted etcd member (by id). */
  private readonly firstSeen = new Map<string, number>();

  constructor(private readonly records: Collection<MemberRecord>, private readonly log: Logger, private readonly after = ABANDONED_AFTER_MS) {}

  /** One round: returns the etcd member ids taken out. */
  async sweep(control: ClusterControl, records: MemberRecord[], etcd: EtcdMemberStatus[], isOnline: (name: string) => boolean, now = Date.now()): Promise<string[]> {
    // etcd names a member once its process connected: an empty name means it never started.
    const unstarted = etcd.filter((e) => e.learner && e.name === '');
    for (const id of this.firstSeen.keys()) if (!unstarted.some((e) => e.id === id)) this.firstSeen.delete(id);
    const removed: string[] = [];
    for (const member of unstarted) {
      const seen = this.firstSeen.get(member.id) ?? now;
      this.firstSeen.set(member.id, seen);
      if (now - seen < this.after) continue;
      const owner = records.find((r) => etcdMemberOf([r], [member]).has(r.name));
      if (owner && isOnline(owner.name)) continue;
      await control.removeEtcdMember(member.id);
      this.firstSeen.delete(member.id);
      removed.push(member.id);
      if (owner) await this.records.delete('', owner.name).catch((err: Error) => this.log.warn({ err, member: owner.name }, 'could not delete the record of an abandoned join'));
      this.log.warn({ member: owner?.name, etcdMember: member.id, peer: member.peerUrl }, 'took out a join that was accepted but never started');
    }
    return removed;
  }
}
