/**
 * The clustered backend: documents in etcd, one key each (etcd-keys.ts). Writes are optimistic
 * transactions: reads happen at one etcd revision, and the commit is an etcd txn that checks every
 * key and range read is unchanged since; when another member got in between, the work runs again.
 * Other members' writes reach this member through a watch, which also keeps a copy of every document
 * in memory (etcd-mirror.ts): reads are answered from it once etcd's current revision is reached.
 */
import type { ICompare, IKeyValue, IRequestOp } from 'etcd3';
import { conflict, type StoreChange } from '../../sdk/index.js';
import type { EtcdConnection } from '../cluster/etcd-client.js';
import type { BackendDump, BackendReader, BackendWriter, DocAddress, Row, StoreBackend } from './backend.js';
import { EtcdMirror } from './etcd-mirror.js';
import { revisionToReach } from './read-scope.js';
import {
  decodeValue, docKey, docPrefix, DOC_PREFIX, encodeValue, parseDocKey, parseSchemaKey, prefixEnd, schemaKey, SCHEMA_PREFIX,
} from './etcd-keys.js';

/** How long one write keeps trying when other members keep changing what it read. */
const RETRY_BOUND_MS = 3_000;
/** Operations per txn when copying a whole store in (etcd is started with a larger --max-txn-ops). */
const LOAD_BATCH = 1_000;
/** How long a read waits for the watch to reach etcd's revision before it reads from etcd itself (the watch
 * normally lags by milliseconds; after a leader change it may lag longer, and a direct read is as fresh). */
const FRESH_WAIT_MS = 150;
/** A key never written: asking for it (count only) is the cheapest linearizable request with a revision. */
const FRESHNESS_KEY = '/corral/freshness';

const str = (b: Buffer | undefined) => (b ? b.toString('utf8') : '');

/** Documents of a collection (optionally one project, optionally names starting with a prefix) at `revision`. */
async function rangeDocs(etcd: EtcdConnection, namespace: string, collection: string, project: string | undefined, namePrefix: string, revision?: number) {
  const prefix = docPrefix(namespace, collection, project, namePrefix);
  const res = await etcd.call((c) => c.kv.range({ key: Buffer.from(prefix), range_end: prefixEnd(prefix), revision }));
  const rows: { key: string; row: Row }[] = [];
  for (const kv of res.kvs) {
    const key = str(kv.key);
    const at = parseDocKey(key);
    if (!at) continue;
    // Without a project the prefix cannot hold the name prefix: filter here.
    if (namePrefix && !at.name.startsWith(namePrefix)) continue;
    rows.push({ key, row: decodeValue(at, str(kv.value), Number(kv.mod_revision)) });
  }
  return { rows, revision: Number(res.header.revision), prefix };
}

/** Keys per page of a whole-prefix read: gRPC refuses answers over 4 MiB, and a store may be larger. */
const PAGE_KEYS = 500;

/** Every key under `prefix`, read in pages all at the revision of the first page. */
async function rangeAll(etcd: EtcdConnection, prefix: string): Promise<{ kvs: IKeyValue[]; revision: number }> {
  const end = prefixEnd(prefix);
  const kvs: IKeyValue[] = [];
  let from = Buffer.from(prefix);
  let revision: number | undefined;
  for (;;) {
    const res = await etcd.call((c) => c.kv.range({ key: from, range_end: end, revision, limit: PAGE_KEYS }));
    revision ??= Number(res.header.revision);
    kvs.push(...res.kvs);
    if (!res.more || !res.kvs.length) return { kvs, revision };
    // The next page starts just after the last key read.
    from = Buffer.concat([res.kvs[res.kvs.length - 1]!.key, Buffer.from([0])]);
  }
}

class EtcdReader implements BackendReader {
  constructor(protected readonly etcd: EtcdConnection) {}

  async get(at: DocAddress): Promise<Row | undefined> {
    const res = await this.etcd.call((c) => c.kv.range({ key: Buffer.from(docKey(at)) }));
    const kv = res.kvs[0];
    return kv && decodeValue(at, str(kv.value), Number(kv.mod_revision));
  }

  async list(namespace: string, collection: string, project?: string, namePrefix = ''): Promise<Row[]> {
    return (await rangeDocs(this.etcd, namespace, collection, project, namePrefix)).rows.map((r) => r.row);
  }

  async schemaVersion(namespace: string): Promise<number> {
    const res = await this.etcd.call((c) => c.kv.range({ key: Buffer.from(schemaKey(namespace)) }));
    return res.kvs[0] ? Number(str(res.kvs[0].value)) : 0;
  }
}

/** One attempt of a write: reads at a fixed revision, writes buffered until commit. */
class EtcdWriter implements BackendWriter {
  committed: number | undefined;
  /** The etcd revision every read of this attempt sees (set by the first read). */
  private snapshot: number | undefined;
  /** Key → mod revision seen (0: absent); checked unchanged at commit. */
  private readonly seen = new Map<string, number>();
  private readonly ranges: { start: string; end: Buffer }[] = [];
  /** Key → value to write (null: delete), in order. */
  private readonly writes = new Map<string, { at?: DocAddress; value: string | null }>();

  constructor(private readonly etcd: EtcdConnection, readonly retry: boolean) {}

  /** What the commit wrote: key → value (null: deleted). */
  *written(): Iterable<[string, string | null]> {
    for (const [key, w] of this.writes) if (w.at) yield [key, w.value];
  }

  private async readKey(key: string): Promise<IKeyValue | undefined> {
    const res = await this.etcd.call((c) => c.kv.range({ key: Buffer.from(key), revision: this.snapshot }));
    this.snapshot ??= Number(res.header.revision);
    const kv = res.kvs[0];
    if (!this.seen.has(key)) this.seen.set(key, kv ? Number(kv.mod_revision) : 0);
    return kv;
  }

  async get(at: DocAddress): Promise<Row | undefined> {
    const key = docKey(at);
    const pending = this.writes.get(key);
    if (pending) return pending.value === null ? undefined : decodeValue(at, pending.value, 0);
    const kv = await this.readKey(key);
    return kv && decodeValue(at, str(kv.value), Number(kv.mod_revision));
  }

  async list(namespace: string, collection: string, project?: string, namePrefix = ''): Promise<Row[]> {
    const { rows, revision, prefix } = await rangeDocs(this.etcd, namespace, collection, project, namePrefix, this.snapshot);
    this.snapshot ??= revision;
    // A key created in the range shows as a newer mod revision of the range; one deleted, by its own entry.
    this.ranges.push({ start: prefix, end: prefixEnd(prefix) });
    const merged = new Map<string, Row>();
    for (const { key, row } of rows) {
      if (!this.seen.has(key)) this.seen.set(key, row.version!);
      merged.set(key, row);
    }
    for (const [key, pending] of this.writes) {
      if (!key.startsWith(prefix) || !pending.at || (namePrefix && !pending.at.name.startsWith(namePrefix))) continue;
      if (pending.value === null) merged.delete(key);
      else merged.set(key, decodeValue(pending.at, pending.value, 0));
    }
    return [...merged.entries()].sort(([a], [b]) => Buffer.compare(Buffer.from(a), Buffer.from(b))).map(([, row]) => row);
  }

  async schemaVersion(namespace: string): Promise<number> {
    const key = schemaKey(namespace);
    const pending = this.writes.get(key);
    if (pending) return Number(pending.value);
    const kv = await this.readKey(key);
    return kv ? Number(str(kv.value)) : 0;
  }

  assume(at: DocAddress, row: Row): boolean {
    if (row.version === undefined) return false;
    const key = docKey(at);
    if (!this.seen.has(key)) this.seen.set(key, row.version);
    return true;
  }

  async put(at: DocAddress, rev: number, body: string): Promise<void> {
    const key = docKey(at);
    // etcd refuses two operations on one key in a txn: the last write wins here.
    this.writes.delete(key);
    this.writes.set(key, { at, value: encodeValue(rev, body) });
  }

  async delete(at: DocAddress): Promise<void> {
    const key = docKey(at);
    this.writes.delete(key);
    this.writes.set(key, { at, value: null });
  }

  async setSchemaVersion(namespace: string, version: number): Promise<void> {
    this.writes.set(schemaKey(namespace), { value: String(version) });
  }

  /** True when committed (or nothing to write); false when something read changed meanwhile. */
  async commit(): Promise<boolean> {
    if (!this.writes.size) return true;
    const compare: ICompare[] = [];
    for (const [key, mod] of this.seen) compare.push({ key: Buffer.from(key), target: 'Mod', result: 'Equal', mod_revision: mod });
    for (const range of this.ranges) {
      compare.push({ key: Buffer.from(range.start), range_end: range.end, target: 'Mod', result: 'Less', mod_revision: this.snapshot! + 1 });
    }
    const success: IRequestOp[] = [...this.writes].map(([key, w]) => (w.value === null
      ? { request_delete_range: { key: Buffer.from(key) } }
      : { request_put: { key: Buffer.from(key), value: Buffer.from(w.value) } }));
    const res = await this.etcd.call((c) => c.kv.txn({ compare, success, failure: [] }));
    if (!res.succeeded) return false;
    this.committed = Number(res.header.revision);
    return true;
  }
}

export class EtcdBackend extends EtcdReader implements StoreBackend {
  readonly kind = 'etcd';
  /** Reads are answered from a copy checked against etcd's revision: a cache above it would only be staler. */
  readonly mirrored = true;
  /** Revisions of this member's own commits: the watch does not publish them again. */
  private readonly own = new Set<number>();
  /** Watch events that arrived while an own commit was in flight (its revision not yet known). */
  private queued: StoreChange[][] | undefined;
  private inflight = 0;
  private deliver: ((list: StoreChange[]) => void) | undefined;
  private resync: (() => void) | undefined;
  private watcher: { cancel(): Promise<void> } | undefined;
  /** Bumped at each (re)start of the watch: events of an older watch are ignored. */
  private generation = 0;
  private readonly mirror = new EtcdMirror();
  /** The freshness check on the wire, and the one that readers arriving meanwhile share after it. */
  private checking: Promise<number> | undefined;
  private nextCheck: Promise<number> | undefined;
  /** Freshness checks sent so far (tests count them to see reads share them). */
  checksSent = 0;

  constructor(etcd: EtcdConnection) {
    super(etcd);
  }

  get reachable(): boolean {
    return this.etcd.healthy;
  }

  get connection(): EtcdConnection {
    return this.etcd;
  }

  /** The in-memory copy (tests read its revision and size). */
  get copy(): EtcdMirror {
    return this.mirror;
  }

  override async get(at: DocAddress): Promise<Row | undefined> {
    if (await this.fresh()) return this.mirror.get(at, docKey(at));
    return super.get(at);
  }

  override async list(namespace: string, collection: string, project?: string, namePrefix = ''): Promise<Row[]> {
    if (await this.fresh()) return this.mirror.list(namespace, collection, project, namePrefix);
    return super.list(namespace, collection, project, namePrefix);
  }

  /**
   * Whether the copy may answer: it holds everything up to etcd's current revision, asked after this
   * read (or the request it serves: read-scope.ts) began. False (read from etcd) while there is no copy or the watch lags past the bound.
   */
  private async fresh(): Promise<boolean> {
    if (!this.mirror.ready) return false;
    return this.mirror.waitFor(await revisionToReach(() => this.currentRevision()), FRESH_WAIT_MS);
  }

  /**
   * etcd's current revision, from a linearizable request. Readers share requests: one that arrives while
   * a request is on the wire cannot use it (it may have been answered before a write this reader must
   * see was acknowledged), so it waits for the next one, which every such reader shares.
   */
  private currentRevision(): Promise<number> {
    if (!this.checking) return this.startCheck();
    this.nextCheck ??= this.checking.then(() => undefined, () => undefined).then(() => {
      this.nextCheck = undefined;
      return this.startCheck();
    });
    return this.nextCheck;
  }

  private startCheck(): Promise<number> {
    this.checksSent++;
    const check = this.etcd.call((c) => c.kv.range({ key: Buffer.from(FRESHNESS_KEY), count_only: true }))
      .then((res) => Number(res.header.revision));
    this.checking = check;
    check.then(() => undefined, () => undefined).finally(() => {
      if (this.checking === check) this.checking = undefined;
    });
    return check;
  }

  async write<R>(work: (w: BackendWriter) => Promise<R>): Promise<R> {
    const giveUp = Date.now() + RETRY_BOUND_MS;
    for (let attempt = 0; Date.now() < giveUp; attempt++) {
      const w = new EtcdWriter(this.etcd, attempt > 0);
      const result = await work(w);
      this.inflight++;
      try {
        if (await w.commit()) {
          if (w.committed !== undefined) {
            this.own.add(w.committed);
            this.mirror.applyOwn(w.committed, w.written());
          }
          return result;
        }
      } finally {
        this.inflight--;
        this.drain();
      }
      // Another member changed what this write read: back off a little and run it again.
      await new Promise((r) => setTimeout(r, Math.random() * Math.min(50, 2 * (attempt + 1))));
    }
    throw conflict('Other cluster members kept changing the same records; try again');
  }

  async watchOthers(changes: (list: StoreChange[]) => void, resync: () => void): Promise<void> {
    this.deliver = changes;
    this.resync = resync;
    await this.startWatch();
    // Another member in use (a standby promoted, a voter gone): the watch starts again there.
    this.stopFollowingSwitches = this.etcd.onSwitch(() => this.restartWatch());
  }

  private stopFollowingSwitches: (() => void) | undefined;

  /**
   * The watch broke (or the member in use changed): what happened meanwhile is unknown, so the copy is
   * dropped (reads go to etcd), caches above are emptied, and copy and watch start again (retried).
   */
  private restartWatch(): void {
    const old = this.watcher;
    this.watcher = undefined;
    this.generation++;
    this.mirror.reset();
    void old?.cancel().catch(() => undefined);
    this.resync?.();
    const again = () => {
      if (!this.deliver || this.watcher) return;
      this.startWatch().catch(() => setTimeout(again, 500).unref());
    };
    again();
  }

  /** Load the copy with one range read at revision L, then watch every key from L + 1. */
  private async startWatch(): Promise<void> {
    const generation = ++this.generation;
    const res = await rangeAll(this.etcd, DOC_PREFIX);
    const loadedAt = res.revision;
    if (generation !== this.generation) return;
    this.mirror.load(res.kvs.map((kv) => ({ key: str(kv.key), value: str(kv.value), mod: Number(kv.mod_revision) })), loadedAt);
    // Every key, not only documents: then each revision arrives as an event and the copy knows which it reached.
    const watcher = await this.etcd.watch((c) => c.watch().prefix('').withPreviousKV().startRevision(String(loadedAt + 1)));
    const current = () => generation === this.generation;
    watcher.on('disconnected', () => {
      // etcd3 resumes by itself, but from the header's revision: start from a fresh copy instead.
      if (current()) this.restartWatch();
    });
    watcher.on('error', () => {
      // A compacted start revision, a cancelled watch.
      if (current()) this.restartWatch();
    });
    watcher.on('data', (res) => {
      if (!current()) return;
      const list: StoreChange[] = [];
      let reached = 0;
      for (const event of res.events) {
        const key = str(event.kv.key);
        const mod = Number(event.kv.mod_revision);
        const deleted = event.type === 'Delete';
        reached = Math.max(reached, mod);
        this.mirror.applyWatched(key, deleted ? null : str(event.kv.value), mod);
        const at = parseDocKey(key);
        if (!at) continue;
        const value = deleted ? event.prev_kv && str(event.prev_kv.value) : str(event.kv.value);
        const rev = value ? decodeValue(at, value, mod).rev : 0;
        list.push({ ...at, kind: deleted ? 'delete' : 'put', rev, mod } as StoreChange & { mod: number });
      }
      // One response holds whole revisions, in order: every change up to the last one is here.
      if (reached) this.mirror.progress(reached);
      if (!list.length) return;
      if (this.inflight) (this.queued ??= []).push(list);
      else this.publishOthers(list);
    });
    if (!this.deliver || !current()) {
      await watcher.cancel().catch(() => undefined);
      return;
    }
    this.watcher = watcher;
  }

  private drain(): void {
    if (this.inflight || !this.queued) return;
    const queued = this.queued;
    this.queued = undefined;
    for (const list of queued) this.publishOthers(list);
  }

  private publishOthers(list: StoreChange[]): void {
    const others: StoreChange[] = [];
    for (const change of list) {
      const { mod, ...plain } = change as StoreChange & { mod: number };
      // Own revisions older than what the watch reached will not come again.
      for (const rev of this.own) if (rev < mod) this.own.delete(rev);
      if (!this.own.has(mod)) others.push(plain);
    }
    if (others.length) this.deliver?.(others);
  }

  async dump(): Promise<BackendDump> {
    const docs: BackendDump['docs'] = [];
    const res = await rangeAll(this.etcd, DOC_PREFIX);
    for (const kv of res.kvs) {
      const at = parseDocKey(str(kv.key));
      if (!at) continue;
      const row = decodeValue(at, str(kv.value), 0);
      docs.push({ ...at, rev: row.rev, body: row.body });
    }
    const versions = new Map<string, number>();
    const schemas = await this.etcd.call((c) => c.kv.range({ key: Buffer.from(SCHEMA_PREFIX), range_end: prefixEnd(SCHEMA_PREFIX) }));
    for (const kv of schemas.kvs) versions.set(parseSchemaKey(str(kv.key)), Number(str(kv.value)));
    return { docs, versions };
  }

  async load(dump: BackendDump): Promise<void> {
    const ops: IRequestOp[] = [
      ...dump.docs.map((d) => ({ request_put: { key: Buffer.from(docKey(d)), value: Buffer.from(encodeValue(d.rev, d.body)) } })),
      ...[...dump.versions].map(([ns, v]) => ({ request_put: { key: Buffer.from(schemaKey(ns)), value: Buffer.from(String(v)) } })),
    ];
    for (let i = 0; i < ops.length; i += LOAD_BATCH) {
      const batch = ops.slice(i, i + LOAD_BATCH);
      await this.etcd.call((c) => c.kv.txn({ compare: [], success: batch, failure: [] }));
    }
  }

  async close(): Promise<void> {
    this.deliver = undefined;
    this.generation++;
    this.mirror.reset();
    this.stopFollowingSwitches?.();
    await this.watcher?.cancel().catch(() => undefined);
    this.watcher = undefined;
  }
}
