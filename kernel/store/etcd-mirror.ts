/**
 * An in-memory copy of every document in etcd, so that a read costs no range read. It is filled by one
 * range read and then kept current by the backend's watch (every key, so that each etcd revision shows
 * up as an event and the copy knows exactly which revision it has reached) and by this member's own
 * commits at their acknowledgement. It never decides alone that it is current: a reader first asks
 * etcd for its current revision (linearizable) and then waits, bounded, until the copy has reached it.
 */
import type { DocAddress, Row } from './backend.js';
import { decodeValue, docPrefix, parseDocKey } from './etcd-keys.js';

interface Entry {
  at: DocAddress;
  /** The stored value (`<rev>\n<body>`); null: deleted at `mod`, kept until the watch has passed it. */
  value: string | null;
  /** etcd's mod revision of the value (or of the deletion). */
  mod: number;
}

/** Own commits ahead of the watch are looked through one by one, up to this many revisions. */
const OWN_GAP_MAX = 64;

/** Characters whose UTF-16 order differs from UTF-8's (surrogates against U+E000-U+FFFF). */
const BEYOND_ORDER = /[\uD800-\uFFFF]/;

/** etcd's order of keys (UTF-8 bytes); plain string order gives the same for every other character, faster. */
export function byteOrder(a: string, b: string): number {
  if (BEYOND_ORDER.test(a) || BEYOND_ORDER.test(b)) return Buffer.compare(Buffer.from(a), Buffer.from(b));
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The collection a key belongs to (its prefix without project and name). */
const collectionOf = (at: DocAddress) => docPrefix(at.namespace, at.collection);

export class EtcdMirror {
  /** Collection prefix → document key → entry. */
  private readonly collections = new Map<string, Map<string, Entry>>();
  /** Each collection's keys in etcd's byte order, made again after a key comes or goes. */
  private readonly sortedKeys = new Map<string, string[]>();
  private readonly tombstones = new Set<Entry & { key: string }>();
  /** Every change up to this revision is in the copy. */
  private reached = 0;
  /** This member's commits applied at acknowledgement, beyond `reached`. */
  private readonly ownAhead = new Set<number>();
  private waiters: { revision: number; done: (fresh: boolean) => void }[] = [];
  private loaded = false;

  /** False until loaded, and from a reset (a broken watch) until loaded again: readers go to etcd then. */
  get ready(): boolean {
    return this.loaded;
  }

  /** The revision the copy has reached (for tests and logs). */
  get revision(): number {
    return this.reached;
  }

  /** Forget everything (the watch broke): waiting readers are told to read from etcd instead. */
  reset(): void {
    this.loaded = false;
    this.collections.clear();
    this.sortedKeys.clear();
    this.tombstones.clear();
    this.ownAhead.clear();
    this.reached = 0;
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w.done(false);
  }

  /** Fill from one range read of every document at `revision`; the watch continues from revision + 1. */
  load(kvs: { key: string; value: string; mod: number }[], revision: number): void {
    this.reset();
    for (const kv of kvs) this.set(kv.key, kv.value, kv.mod);
    this.reached = revision;
    this.loaded = true;
  }

  /** One change from the watch (any key: those that are no document only count as progress). */
  applyWatched(key: string, value: string | null, mod: number): void {
    if (this.loaded) this.set(key, value, mod);
  }

  /** The watch has delivered every change up to `revision`. */
  progress(revision: number): void {
    if (!this.loaded || revision <= this.reached) return;
    this.reached = revision;
    for (const own of this.ownAhead) if (own <= revision) this.ownAhead.delete(own);
    for (const t of this.tombstones) {
      if (t.mod > revision) continue;
      this.tombstones.delete(t);
      const docs = this.collections.get(collectionOf(t.at));
      if (docs?.get(t.key) === t) {
        docs.delete(t.key);
        this.sortedKeys.delete(collectionOf(t.at));
      }
    }
    this.wake();
  }

  /** This member's commit, acknowledged at `revision`: in the copy at once (the watch brings it again later). */
  applyOwn(revision: number, writes: Iterable<[string, string | null]>): void {
    if (!this.loaded || revision <= this.reached) return;
    for (const [key, value] of writes) this.set(key, value, revision);
    this.ownAhead.add(revision);
    this.wake();
  }

  /** Whether every change up to `revision` is in the copy (the watch's, or this member's own commits). */
  covers(revision: number): boolean {
    if (!this.loaded) return false;
    if (revision <= this.reached) return true;
    if (revision - this.reached > OWN_GAP_MAX) return false;
    for (let r = this.reached + 1; r <= revision; r++) if (!this.ownAhead.has(r)) return false;
    return true;
  }

  /** True once the copy covers `revision`; false after `boundMs` or a reset (the reader goes to etcd). */
  waitFor(revision: number, boundMs: number): Promise<boolean> {
    if (this.covers(revision)) return Promise.resolve(true);
    if (!this.loaded) return Promise.resolve(false);
    return new Promise((resolve) => {
      const waiter = {
        revision,
        done: (fresh: boolean) => {
          clearTimeout(timer);
          resolve(fresh);
        },
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        resolve(false);
      }, boundMs);
      this.waiters.push(waiter);
    });
  }

  get(at: DocAddress, key: string): Row | undefined {
    const entry = this.collections.get(collectionOf(at))?.get(key);
    return entry?.value == null ? undefined : decodeValue(entry.at, entry.value, entry.mod);
  }

  /** Ordered as etcd orders keys (project, then name), as a range read answers. */
  list(namespace: string, collection: string, project: string | undefined, namePrefix: string): Row[] {
    const name = docPrefix(namespace, collection);
    const docs = this.collections.get(name);
    if (!docs) return [];
    const prefix = docPrefix(namespace, collection, project, namePrefix);
    const rows: Row[] = [];
    for (const key of this.keysOf(name, docs)) {
      if (!key.startsWith(prefix)) continue;
      const entry = docs.get(key)!;
      if (entry.value === null || (namePrefix && !entry.at.name.startsWith(namePrefix))) continue;
      rows.push(decodeValue(entry.at, entry.value, entry.mod));
    }
    return rows;
  }

  /** Documents and bytes held (keys and values as UTF-16 strings), for the memory figure. */
  size(): { docs: number; chars: number } {
    let docs = 0;
    let chars = 0;
    for (const c of this.collections.values()) {
      for (const [key, e] of c) {
        if (e.value === null) continue;
        docs++;
        chars += key.length + e.value.length;
      }
    }
    return { docs, chars };
  }

  private keysOf(name: string, docs: Map<string, Entry>): string[] {
    let keys = this.sortedKeys.get(name);
    if (!keys) {
      keys = [...docs.keys()].sort(byteOrder);
      this.sortedKeys.set(name, keys);
    }
    return keys;
  }

  /** A newer value (or deletion) of `key`; an older one (a late watch event) changes nothing. */
  private set(key: string, value: string | null, mod: number): void {
    const at = parseDocKey(key);
    if (!at) return;
    const name = collectionOf(at);
    let docs = this.collections.get(name);
    if (!docs) this.collections.set(name, (docs = new Map()));
    const old = docs.get(key);
    if (old && old.mod >= mod) return;
    if (!old && value === null && mod <= this.reached) return;
    const entry = { key, at, value, mod };
    docs.set(key, entry);
    if (!old) this.sortedKeys.delete(name);
    if (value === null) this.tombstones.add(entry);
  }

  private wake(): void {
    if (!this.waiters.length) return;
    const still: typeof this.waiters = [];
    for (const w of this.waiters) {
      if (this.covers(w.revision)) w.done(true);
      else still.push(w);
    }
    this.waiters = still;
  }
}
