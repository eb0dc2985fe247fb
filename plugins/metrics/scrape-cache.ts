/**
 * Scrapes are cached per project selection for a few seconds, as the reference does, so that
 * several scrapers (or a fast scrape interval) cost one read of every instance. Instance lifecycle
 * events drop the cache: a stopped instance must not linger in the next answer.
 */
import type { InstanceMetricsEntry } from '../../sdk/index.js';

export const CACHE_TTL_MS = 8000;

interface Cached {
  at: number;
  entries: Promise<InstanceMetricsEntry[]>;
}

export class ScrapeCache {
  private readonly cached = new Map<string, Cached>();

  constructor(private readonly collect: (project?: string) => Promise<InstanceMetricsEntry[]>, private readonly ttlMs = CACHE_TTL_MS) {}

  /** `undefined`: every project. Concurrent scrapes of one selection share a single collection. */
  get(project: string | undefined, now = Date.now()): Promise<InstanceMetricsEntry[]> {
    const key = project ?? '';
    const hit = this.cached.get(key);
    if (hit && now - hit.at < this.ttlMs) return hit.entries;
    const entries = this.collect(project);
    const entry = { at: now, entries };
    this.cached.set(key, entry);
    // A failed collection is not kept: the next scrape tries again.
    entries.catch(() => {
      if (this.cached.get(key) === entry) this.cached.delete(key);
    });
    return entries;
  }

  clear(): void {
    this.cached.clear();
  }
}
