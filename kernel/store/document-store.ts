/**
 * The document store of DESIGN section 5: JSON documents keyed by namespace, collection, project and
 * name, each with a revision; compare-and-swap; transactions; per-namespace migrations; a change feed
 * published after commit. Rows live in a backend (sqlite standalone, etcd clustered) that can be
 * switched while the daemon runs: plugins keep their Store objects, which always reach the current one.
 */
import { conflict, RevisionMismatch, type Collection, type Migration, type Store, type StoreChange, type StoredDoc } from '../../sdk/index.js';
import { addressKey, type BackendDump, type BackendReader, type BackendWriter, type DocAddress, type Row, type StoreBackend } from './backend.js';
import { SqliteBackend } from './sqlite-backend.js';
import { Mutex } from './mutex.js';

/** One write in progress: what it wrote, to publish after commit. */
interface Tx {
  w: BackendWriter;
  changes: StoreChange[];
  /** Rows a single write (outside a plugin transaction) stored: cached once committed. */
  written: Map<string, Row>;
  single: boolean;
}

const toDoc = <T>(row: Row): StoredDoc<T> => ({ project: row.project, name: row.name, rev: row.rev, doc: JSON.parse(row.body) as T });

/** Rows kept in memory for `get`; every change (own or, on etcd, another member's) passes through publish(). */
const ROW_CACHE_MAX = 20_000;
/** Listings kept for `list`, per collection (dropped by any change to it); big ones are read every time. */
const LISTS_PER_COLLECTION_MAX = 64;
const LIST_ROWS_MAX = 2_000;
const collectionKey = (namespace: string, collection: string) => `${namespace}\0${collection}`;

/** How the data moves at a backend switch: copied along (enabling clustering) or left behind (joining). */
export type SwitchMode = 'copy' | 'discard';

export class DocumentStore {
  /** Local writes one at a time: sqlite has one writer, and on etcd it keeps the cache's bookkeeping simple. */
  private readonly mutex = new Mutex();
  private readonly listeners = new Set<(change: StoreChange) => void>();
  private readonly rows = new Map<string, Row>();
  /** Listings by collection, then by project and name prefix. */
  private readonly lists = new Map<string, Map<string, Row[]>>();
  /** Bumped by every published change: a read that overlapped one does not fill the cache. */
  private changeCount = 0;

  constructor(private backend: StoreBackend) {}

  /** A sqlite store: `file` is a path, or ':memory:' for tests. */
  static async open(file: string): Promise<DocumentStore> {
    return DocumentStore.over(await SqliteBackend.open(file));
  }

  /** A store over any backend (etcd when a clustered daemon boots). */
  static async over(backend: StoreBackend): Promise<DocumentStore> {
    const store = new DocumentStore(backend);
    await store.follow(backend);
    store.flushHeld(backend);
    return store;
  }

  get backendKind(): StoreBackend['kind'] {
    return this.backend.kind;
  }

  namespace(namespace: string): Store {
    return new NamespaceView(this, namespace, undefined);
  }

  async close(): Promise<void> {
    await this.mutex.run(() => this.backend.close());
  }

  /**
   * Put `next` in place of the current backend, under the store's lock (no write runs meanwhile).
   * `copy` loads every document and schema version into `next` (revisions kept); `discard` keeps what
   * `next` holds and publishes a change for every document that differs, so plugins' caches follow.
   * Returns the previous backend, still open (the caller closes or keeps it). On failure nothing changed.
   * `known` stands for the previous backend's content when it can no longer be read.
   */
  async switchBackend(next: StoreBackend, mode: SwitchMode, known?: BackendDump): Promise<StoreBackend> {
    const previous = await this.swap(next, mode, known);
    // Data left behind: the namespaces' migrations run on what the new backend holds (a fresh store gets
    // its seed documents; a cluster that already ran them is skipped by their versions).
    if (mode === 'discard') {
      for (const [namespace, steps] of this.migrations) await this.namespace(namespace).migrate(steps);
    }
    return previous;
  }

  /** Every namespace's migrations as last run, for running them again on a new backend. */
  private readonly migrations = new Map<string, Migration[]>();

  /** @internal */
  recordMigrations(namespace: string, steps: Migration[]): void {
    this.migrations.set(namespace, steps);
  }

  private swap(next: StoreBackend, mode: SwitchMode, known?: BackendDump): Promise<StoreBackend> {
    return this.mutex.run(async () => {
      const previous = this.backend;
      // `known`: what the caller read before the previous backend went away (a member leaving its cluster).
      const before = known ?? await previous.dump();
      if (mode === 'copy') await next.load(before);
      // Other writers' changes from now on are held until the switch and then published.
      await this.follow(next);
      let after: BackendDump | undefined;
      try {
        after = mode === 'discard' ? await next.dump() : undefined;
      } catch (err) {
        // Nothing switched: the new backend stops following.
        this.held.delete(next);
        await next.close().catch(() => undefined);
        throw err;
      }
      this.backend = next;
      this.forget();
      if (after) {
        const old = new Map(before.docs.map((d) => [addressKey(d), d]));
        const changes: StoreChange[] = [];
        for (const doc of after.docs) {
          const was = old.get(addressKey(doc));
          old.delete(addressKey(doc));
          if (!was || was.rev !== doc.rev || was.body !== doc.body) changes.push(changeOf(doc, 'put', doc.rev));
        }
        for (const gone of old.values()) changes.push(changeOf(gone, 'delete', gone.rev));
        this.publish(changes, undefined);
      }
      this.flushHeld(next);
      return previous;
    });
  }

  /** Every document of the current backend (a member about to leave its cluster keeps this to diff against). */
  dumpBackend(): Promise<BackendDump> {
    return this.backend.dump();
  }

  private held = new Map<StoreBackend, StoreChange[]>();

  /** Publish what other writers commit to `backend` while it is the current one; hold it until then. */
  private async follow(backend: StoreBackend): Promise<void> {
    if (!backend.watchOthers) return;
    this.held.set(backend, []);
    await backend.watchOthers(
      (list) => {
        const queue = this.held.get(backend);
        if (queue) queue.push(...list);
        else if (this.backend === backend) this.publish(list, undefined);
      },
      () => {
        if (this.backend !== backend) return;
        // Changes may have been missed (a watch that had to start again): forget every cached row.
        this.forget();
      },
    );
  }

  private flushHeld(backend: StoreBackend): void {
    const queue = this.held.get(backend);
    this.held.delete(backend);
    if (queue?.length) this.publish(queue, undefined);
  }

  /** @internal */
  read<R>(tx: Tx | undefined, fn: (reader: BackendReader) => Promise<R>): Promise<R> {
    if (tx) return fn(tx.w);
    const backend = this.backend;
    // An in-memory sqlite database has one connection: its reads wait for the writer.
    if (backend instanceof SqliteBackend && backend.readsNeedWriter) return this.mutex.run(() => fn(this.backend));
    return fn(backend);
  }

  /** @internal A write outside a transaction holds the store's lock for its few steps, so compare-and-swap is atomic. */
  write<R>(tx: Tx | undefined, fn: (tx: Tx) => Promise<R>): Promise<R> {
    if (tx) return fn(tx);
    return this.mutex.run(() => this.commit(fn, true));
  }

  /** @internal */
  transaction<R>(fn: (tx: Tx) => Promise<R>): Promise<R> {
    return this.mutex.run(() => this.commit(fn, false));
  }

  private async commit<R>(fn: (tx: Tx) => Promise<R>, single: boolean): Promise<R> {
    let tx!: Tx;
    // An optimistic backend may run the work again: each run starts from nothing.
    const result = await this.backend.write((w) => {
      tx = { w, changes: [], written: new Map(), single };
      return fn(tx);
    }, single);
    if (tx.w.committed !== undefined) for (const row of tx.written.values()) row.version = tx.w.committed;
    this.publish(tx.changes, tx.written);
    return result;
  }

  /** @internal */
  subscribe(listener: (change: StoreChange) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** @internal Nothing from the cache while the backend cannot answer: a member cut off from its cluster must not serve what may be stale. */
  cachedRow(key: string): Row | undefined {
    return this.backend.reachable ? this.rows.get(key) : undefined;
  }

  /**
   * @internal A row for a read outside a write. A mirrored backend answers reads from its own copy once it
   * is current; the cache (fed by the watch, unchecked) could miss another member's acknowledged write.
   */
  readableRow(key: string): Row | undefined {
    return this.readsCached() ? this.rows.get(key) : undefined;
  }

  /** Whether reads outside a write may be answered from memory (see readableRow()). */
  private readsCached(): boolean {
    return !this.backend.mirrored && this.backend.reachable;
  }

  /**
   * Changes with every document change this process publishes (its own writes, other members' once
   * followed). Undefined while reads are not answered from memory here (a cluster member's reads check
   * the cluster first): nothing may be reused on its word then.
   */
  revision(): number | undefined {
    return this.readsCached() ? this.changeCount : undefined;
  }

  /** @internal The change count to hand back to rememberRow() once a read finishes. */
  readStamp(): number {
    return this.changeCount;
  }

  /** @internal */
  rememberRow(key: string, row: Row, stamp: number): void {
    if (stamp !== this.changeCount) return;
    if (this.rows.size >= ROW_CACHE_MAX) this.rows.clear();
    this.rows.set(key, row);
  }

  /** @internal A listing for a read outside a write, under the same rules as readableRow(). */
  readableList(collection: string, key: string): Row[] | undefined {
    return this.readsCached() ? this.lists.get(collection)?.get(key) : undefined;
  }

  /** @internal */
  rememberList(collection: string, key: string, rows: Row[], stamp: number): void {
    if (stamp !== this.changeCount || rows.length > LIST_ROWS_MAX) return;
    let byKey = this.lists.get(collection);
    if (!byKey) this.lists.set(collection, (byKey = new Map()));
    else if (byKey.size >= LISTS_PER_COLLECTION_MAX) byKey.clear();
    byKey.set(key, rows);
  }

  /** Every cached row and listing goes (changes may have been missed, or the backend changed). */
  private forget(): void {
    this.rows.clear();
    this.lists.clear();
    this.changeCount++;
  }

  private publish(changes: StoreChange[], written: Map<string, Row> | undefined): void {
    if (changes.length) this.changeCount++;
    for (const change of changes) {
      this.rows.delete(addressKey(change));
      this.lists.delete(collectionKey(change.namespace, change.collection));
    }
    if (written) for (const [key, row] of written) this.rememberRow(key, row, this.changeCount);
    for (const change of changes) for (const listener of this.listeners) listener(change);
  }
}

const changeOf = (at: DocAddress, kind: StoreChange['kind'], rev: number): StoreChange =>
  ({ namespace: at.namespace, collection: at.collection, project: at.project, name: at.name, kind, rev });

class NamespaceView implements Store {
  constructor(private readonly core: DocumentStore, readonly namespace: string, private readonly tx: Tx | undefined) {}

  collection<T>(name: string): Collection<T> {
    return new CollectionView<T>(this.core, this.namespace, name, this.tx);
  }

  transaction<R>(fn: (tx: Store) => Promise<R>): Promise<R> {
    if (this.tx) return fn(this);
    return this.core.transaction((tx) => fn(new NamespaceView(this.core, this.namespace, tx)));
  }

  async migrate(steps: Migration[]): Promise<void> {
    this.core.recordMigrations(this.namespace, steps);
    const ordered = [...steps].sort((a, b) => a.version - b.version);
    for (const step of ordered) {
      // The version is read and written in the step's transaction: on etcd, two members migrating at
      // once conflict, and the one that runs again sees the step done.
      await this.core.transaction(async (tx) => {
        if ((await tx.w.schemaVersion(this.namespace)) >= step.version) return;
        await step.up(new NamespaceView(this.core, this.namespace, tx));
        await tx.w.setSchemaVersion(this.namespace, step.version);
      });
    }
  }

  onChange(listener: (change: StoreChange) => void): () => void {
    return this.core.subscribe((change) => {
      if (change.namespace === this.namespace) listener(change);
    });
  }
}

class CollectionView<T> implements Collection<T> {
  constructor(
    private readonly core: DocumentStore,
    private readonly namespace: string,
    private readonly name: string,
    private readonly tx: Tx | undefined,
  ) {}

  private at(project: string, name: string): DocAddress {
    return { namespace: this.namespace, collection: this.name, project, name };
  }

  get(project: string, name: string): Promise<StoredDoc<T> | undefined> {
    // Inside a transaction the transaction's own writes count: no cache there.
    const at = this.at(project, name);
    const cacheKey = this.tx ? undefined : addressKey(at);
    const hit = cacheKey && this.core.readableRow(cacheKey);
    if (hit) return Promise.resolve(toDoc<T>(hit));
    const stamp = this.core.readStamp();
    return this.core.read(this.tx, async (reader) => {
      const row = await reader.get(at);
      if (row && cacheKey) this.core.rememberRow(cacheKey, row, stamp);
      return row && toDoc<T>(row);
    });
  }

  list(project?: string, namePrefix = ''): Promise<StoredDoc<T>[]> {
    // As get(): inside a transaction its own writes count, so no cache there.
    const collection = collectionKey(this.namespace, this.name);
    const key = this.tx ? undefined : `${project ?? '\0'}\0${namePrefix}`;
    const hit = key !== undefined ? this.core.readableList(collection, key) : undefined;
    if (hit) return Promise.resolve(hit.map((row) => toDoc<T>(row)));
    const stamp = this.core.readStamp();
    return this.core.read(this.tx, async (reader) => {
      const rows = await reader.list(this.namespace, this.name, project, namePrefix);
      if (key !== undefined) this.core.rememberList(collection, key, rows, stamp);
      return rows.map((row) => toDoc<T>(row));
    });
  }

  put(project: string, name: string, doc: T, expectedRev?: number): Promise<StoredDoc<T>> {
    return this.core.write(this.tx, async (tx) => {
      const at = this.at(project, name);
      const current = await this.current(tx, at);
      this.checkRevision(name, current?.rev, expectedRev);
      const rev = (current?.rev ?? 0) + 1;
      const body = JSON.stringify(doc);
      await tx.w.put(at, rev, body);
      tx.changes.push(changeOf(at, 'put', rev));
      if (tx.single) tx.written.set(addressKey(at), { project, name, rev, body });
      return { project, name, rev, doc };
    });
  }

  /**
   * The stored row before a write. A single write holds the store's lock and the cache holds only
   * committed rows, so a cached row is the current one (on etcd its version is checked again at commit).
   */
  private async current(tx: Tx, at: DocAddress): Promise<Row | undefined> {
    const cached = tx.single && !tx.w.retry ? this.core.cachedRow(addressKey(at)) : undefined;
    if (cached && tx.w.assume(at, cached)) return cached;
    return tx.w.get(at);
  }

  delete(project: string, name: string, expectedRev?: number): Promise<boolean> {
    return this.core.write(this.tx, async (tx) => {
      const at = this.at(project, name);
      const current = await tx.w.get(at);
      if (!current) return false;
      this.checkRevision(name, current.rev, expectedRev);
      await tx.w.delete(at);
      tx.changes.push(changeOf(at, 'delete', current.rev));
      return true;
    });
  }

  rename(project: string, name: string, newProject: string, newName: string): Promise<StoredDoc<T>> {
    // Two rows change: always a transaction, even for sqlite's single writes.
    const run = <R>(fn: (tx: Tx) => Promise<R>) => (this.tx ? fn(this.tx) : this.core.transaction(fn));
    return run(async (tx) => {
      const from = this.at(project, name);
      const to = this.at(newProject, newName);
      const row = await tx.w.get(from);
      if (!row) throw new RevisionMismatch(`"${name}"`);
      if (await tx.w.get(to)) throw conflict(`"${newName}" already exists`);
      await tx.w.delete(from);
      await tx.w.put(to, row.rev + 1, row.body);
      tx.changes.push(changeOf(from, 'delete', row.rev));
      tx.changes.push(changeOf(to, 'put', row.rev + 1));
      return { project: newProject, name: newName, rev: row.rev + 1, doc: JSON.parse(row.body) as T };
    });
  }

  private checkRevision(name: string, current: number | undefined, expected: number | undefined): void {
    if (expected === undefined) return;
    if (expected === 0 && current !== undefined) throw conflict(`"${name}" already exists`);
    if (expected > 0 && current !== expected) throw new RevisionMismatch(`"${name}"`);
  }
}
