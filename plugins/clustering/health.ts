/**
 * Who is online: every member holds an etcd lease under `members/<name>` while it runs, writes that key
 * again every BEAT_MS (a heartbeat), and watches everybody's. A member is OFFLINE when its key is gone
 * (its lease lapsed, or a clean stop revoked it: at once), or when its heartbeat stopped while this
 * member's own kept arriving for longer than the stale bound (decision 0062). Judging against our own
 * heartbeat means a cluster-wide stall (an election) makes nobody stale; judging by arrival time here
 * means no clocks are compared. The lease TTL stays the backstop: etcd renews every lease at a leader
 * change, so a killed leader's member would otherwise show only after election plus a full TTL.
 */
import type { ClusterControl } from '../../sdk/index.js';

export const LEASE_PREFIX = 'members/';
/** Lease TTL cap: keepalives run every third of it, so a live member never lapses under normal load. */
export const MAX_LEASE_TTL_SECONDS = 3;
/** How often each member writes its key. */
export const BEAT_MS = 500;
/** A heartbeat this much behind our own means the member is gone (capped by cluster.offline_threshold). */
export const MAX_STALE_MS = 2500;
/** How often staleness is looked at (nothing arrives when a member dies). */
const JUDGE_MS = 200;

export interface MemberHealth {
  online: boolean;
  message: string;
}

export class Health {
  private held = new Map<string, string>();
  /** When this member last saw each member's key written (its own included): local clock only. */
  private readonly seen = new Map<string, number>();
  /** When this member saw a lease go away: the time of the last heartbeat is about one TTL earlier. */
  private readonly lapsed = new Map<string, number>();
  private release: (() => Promise<void>) | undefined;
  private unwatch: (() => void) | undefined;
  private judge: NodeJS.Timeout | undefined;
  private ttl = MAX_LEASE_TTL_SECONDS;
  private staleMs = MAX_STALE_MS;
  private self: string | undefined;
  private online = '';

  constructor(private readonly changed: () => void) {}

  static ttlFor(offlineThreshold: number): number {
    return Math.max(1, Math.min(offlineThreshold, MAX_LEASE_TTL_SECONDS));
  }

  static staleFor(offlineThreshold: number): number {
    return Math.max(2 * BEAT_MS, Math.min(offlineThreshold * 1000, MAX_STALE_MS));
  }

  /** Hold this member's lease with its heartbeat, and watch everybody's. */
  async start(control: ClusterControl, name: string, offlineThreshold: number): Promise<void> {
    await this.stop();
    this.ttl = Health.ttlFor(offlineThreshold);
    this.staleMs = Health.staleFor(offlineThreshold);
    this.self = name;
    const since = new Date().toISOString();
    let beat = 0;
    this.release = await control.holdLease(`${LEASE_PREFIX}${name}`, () => JSON.stringify({ since, beat: beat++ }), this.ttl, { beatMs: BEAT_MS });
    this.unwatch = await control.watchLeases(LEASE_PREFIX, (held) => this.update(held));
    this.judge = setInterval(() => this.rejudge(), JUDGE_MS);
    this.judge.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.judge);
    this.judge = undefined;
    this.unwatch?.();
    this.unwatch = undefined;
    const release = this.release;
    this.release = undefined;
    await release?.().catch(() => undefined);
    this.held = new Map();
    this.seen.clear();
    this.online = '';
  }

  get running(): boolean {
    return this.release !== undefined;
  }

  private update(held: ReadonlyMap<string, string>): void {
    const now = new Map<string, string>();
    for (const [key, value] of held) now.set(key.startsWith(LEASE_PREFIX) ? key.slice(LEASE_PREFIX.length) : key, value);
    const at = Date.now();
    for (const name of this.held.keys()) {
      if (!now.has(name)) {
        this.lapsed.set(name, at);
        this.seen.delete(name);
      }
    }
    for (const [name, value] of now) {
      this.lapsed.delete(name);
      if (this.held.get(name) !== value) this.seen.set(name, at);
    }
    const keysChanged = now.size !== this.held.size || [...now.keys()].some((n) => !this.held.has(n));
    this.held = now;
    this.rejudge(keysChanged);
  }

  /** Tell the owner when a key came or went, or who is online changed (not at every heartbeat). */
  private rejudge(keysChanged = false): void {
    const online = [...this.held.keys()].filter((n) => this.isOnline(n)).sort().join(',');
    if (!keysChanged && online === this.online) return;
    this.online = online;
    this.changed();
  }

  /** How far a member's heartbeat is behind ours (0 while we cannot judge: our own not seen yet). */
  private behind(name: string): number {
    const ours = this.self ? this.seen.get(this.self) : undefined;
    const theirs = this.seen.get(name);
    if (ours === undefined || theirs === undefined || name === this.self) return 0;
    return ours - theirs;
  }

  isOnline(name: string): boolean {
    return this.held.has(name) && this.behind(name) <= this.staleMs;
  }

  of(name: string): MemberHealth {
    if (this.isOnline(name)) return { online: true, message: 'Fully operational' };
    const seen = this.seen.get(name);
    const lapsedAt = this.lapsed.get(name);
    const last = seen ?? (lapsedAt === undefined ? undefined : lapsedAt - this.ttl * 1000);
    if (last === undefined) return { online: false, message: 'No heartbeat' };
    const seconds = ((Date.now() - last) / 1000).toFixed(1);
    return { online: false, message: `No heartbeat for ${seconds}s (${new Date(last).toISOString()})` };
  }
}
