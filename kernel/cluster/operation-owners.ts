/**
 * Which member holds an operation this member does not have. Operations live in their member's memory
 * (no store write per operation); a member learns an owner from the 202 answers it forwarded, and
 * otherwise asks every other online member at once. Listings gather every member's operations.
 */
import type Logger from 'bunyan';
import type { ClusterMemberInfo } from '../../sdk/index.js';
import type { Caller } from '../http/api-request.js';
import type { KernelClusterView } from './cluster-view.js';
import type { Forwarder } from './forwarder.js';

/** An owner remembered this long (operations are kept a few seconds after they end). */
const REMEMBER_MS = 30 * 60_000;
const MAX_REMEMBERED = 10_000;
/** How long a search or a listing waits for a member; one slower than this is left out. */
export const FAN_OUT_BOUND_MS = 3_000;

export class OperationOwners {
  private readonly known = new Map<string, { member: string; until: number }>();

  constructor(private readonly view: KernelClusterView, private readonly forwarder: Forwarder, private readonly log: Logger) {}

  remember(id: string, member: string): void {
    if (this.known.size >= MAX_REMEMBERED) {
      // The oldest entries go first (a Map keeps insertion order).
      for (const key of [...this.known.keys()].slice(0, MAX_REMEMBERED / 10)) this.known.delete(key);
    }
    this.known.delete(id);
    this.known.set(id, { member, until: Date.now() + REMEMBER_MS });
  }

  /** The member holding operation `id`, or undefined when no other member has it. */
  async find(id: string): Promise<string | undefined> {
    const known = this.known.get(id);
    if (known && known.until > Date.now() && this.view.member(known.member)) return known.member;
    this.known.delete(id);
    const path = `/1.0/operations/${encodeURIComponent(id)}`;
    const answers = await Promise.all(this.others().map(async (member) => {
      const answer = await this.forwarder.request(member, 'GET', path, undefined, undefined, FAN_OUT_BOUND_MS).catch(() => undefined);
      return answer?.status === 200 ? member.name : undefined;
    }));
    const owner = answers.find((name) => name !== undefined);
    if (owner) this.remember(id, owner);
    return owner;
  }

  /**
   * Every other online member's operations for `caller` (`query` as the listing got it), grouped by
   * status as the listing is. A member that fails or is slow is left out and logged.
   */
  async gather(query: string, caller: Caller): Promise<Record<string, unknown[]>[]> {
    const lists = await Promise.all(this.others().map(async (member) => {
      try {
        const answer = await this.forwarder.request(member, 'GET', `/1.0/operations?${query}`, undefined, caller, FAN_OUT_BOUND_MS);
        if (answer.status === 200 && answer.body?.metadata && typeof answer.body.metadata === 'object') return answer.body.metadata as Record<string, unknown[]>;
        this.log.warn({ member: member.name, status: answer.status }, 'a member did not list its operations');
      } catch (err) {
        this.log.warn({ member: member.name, err }, 'a member could not be asked for its operations');
      }
      return undefined;
    }));
    return lists.filter((list): list is Record<string, unknown[]> => list !== undefined);
  }

  private others(): ClusterMemberInfo[] {
    return this.view.members().filter((m) => m.online && m.name !== this.view.serverName);
  }
}
