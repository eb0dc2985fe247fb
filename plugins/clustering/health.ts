/**
 * Who is online: every member holds an etcd lease under `members/<name>` while it runs and watches
 * everybody's. A member whose lease lapsed (killed, cut off, hung) is OFFLINE; the lease TTL is the
 * offline threshold capped at a few seconds (decision 0056), so a dead member shows within that cap.
 */
import type { ClusterControl } from '../../sdk/index.js';

export const LEASE_PREFIX = 'members/';
/** Lease TTL cap: keepalives run every third of it, so a live member never lapses under normal load. */
export const MAX_LEASE_TTL_SECONDS = 3;

export interface MemberHealth {
  online: boolean;
  message: string;
}

export class Health {
  private held = new Map<string, string>();
  /** When this member saw a lease go away: the time of the last heartbeat is about one TTL earlier. */
  private readonly lapsed = new Map<string, number>();
  private release: (() => Promise<void>) | undefined;
  private unwatch: (() => void) | undefined;
  private ttl = MAX_LEASE_TTL_SECONDS;

  constructor(private readonly changed: () => void) {}

  static ttlFor(offlineThreshold: number): number {
    return Math.max(1, Math.min(offlineThreshold, MAX_LEASE_TTL_SECONDS));
  }

  /** Hold this member's lease and watch everybody's. */
  async start(control: ClusterControl, name: string, offlineThreshold: number): Promise<void> {
    await this.stop();
    this.ttl = Health.ttlFor(offlineThreshold);
    this.release = await control.holdLease(`${LEASE_PREFIX}${name}`, JSON.stringify({ since: new Date().toISOString() }), this.ttl);
    this.unwatch = await control.watchLeases(LEASE_PREFIX, (held) => this.update(held));
  }

  async stop(): Promise<void> {
    this.unwatch?.();
    this.unwatch = undefined;
    const release = this.release;
    this.release = undefined;
    await release?.().catch(() => undefined);
    this.held = new Map();
  }

  get running(): boolean {
    return this.release !== undefined;
  }

  private update(held: ReadonlyMap<string, string>): void {
    const now = new Map<string, string>();
    for (const [key, value] of held) now.set(key.startsWith(LEASE_PREFIX) ? key.slice(LEASE_PREFIX.length) : key, value);
    for (const name of this.held.keys()) if (!now.has(name)) this.lapsed.set(name, Date.now());
    for (const name of now.keys()) this.lapsed.delete(name);
    this.held = now;
    this.changed();
  }

  isOnline(name: string): boolean {
    return this.held.has(name);
  }

  of(name: string): MemberHealth {
    if (this.held.has(name)) return { online: true, message: 'Fully operational' };
    const lapsedAt = this.lapsed.get(name);
    if (lapsedAt === undefined) return { online: false, message: 'No heartbeat' };
    const last = lapsedAt - this.ttl * 1000;
    const seconds = ((Date.now() - last) / 1000).toFixed(1);
    return { online: false, message: `No heartbeat for ${seconds}s (${new Date(last).toISOString()})` };
  }
}
