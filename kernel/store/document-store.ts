/**
 * The document store of DESIGN section 5 on sqlite (WAL, one file in the data dir): JSON documents
 * keyed by namespace, collection, project and name, each with a revision; transactions; per-namespace
 * migrations; a change feed published after commit. No SQL leaves this file and sqlite.ts.
 */
import { conflict, RevisionMismatch, type Collection, type Migration, type Store, type StoreChange, type StoredDoc } from '../../sdk/index.js';
import { SqliteConnection } from './sqlite.js';
import { Mutex } from './mutex.js';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS documents (
  namespace TEXT NOT NULL, collection TEXT NOT NULL, project TEXT NOT NULL, name TEXT NOT NULL,
  rev INTEGER NOT NULL, body TEXT NOT NULL,
  PRIMARY KEY (namespace, collection, project, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS schema_versions (namespace TEXT PRIMARY KEY, version INTEGER NOT NULL);
`;

interface Tx {
  conn: SqliteConnection;
  changes: StoreChange[];
}

interface Row {
  project: string;
  name: string;
  rev: number;
  body: string;
}

const toDoc = <T>(row: Row): StoredDoc<T> => ({ project: row.project, name: row.name, rev: row.rev, doc: JSON.parse(row.body) as T });

/** Rows kept in memory for `get`; the store is the database's only writer, so every change passes through publish(). */
const ROW_CACHE_MAX = 20_000;
const rowKey = (namespace: string, collection: string, project: string, name: string) => `${namespace}\0${collection}\0${project}\0${name}`;

export class DocumentStore {
  private readonly mutex = new Mutex();
  private readonly listeners = new Set<(change: StoreChange) => void>();
  private readonly rows = new Map<string, Row>();
  /** Bumped by every published change: a read that overlapped one does not fill the cache. */
  private changeCount = 0;

  private constructor(private readonly writer: SqliteConnection, private readonly reader: SqliteConnection | undefined) {}

  /** `file` is a path, or ':memory:' for tests. */
  static async open(file: string): Promise<DocumentStore> {
    const writer = await SqliteConnection.open(file);
    if (file !== ':memory:') {
      await writer.exec('PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=5000;');
    }
    await writer.exec(SCHEMA);
    // A second connection lets reads proceed while a transaction holds the writer (WAL readers see the last commit).
    const reader = file === ':memory:' ? undefined : await SqliteConnection.open(file, true);
    return new DocumentStore(writer, reader);
  }

  namespace(namespace: string): Store {
    return new NamespaceView(this, namespace, undefined);
  }

  async close(): Promise<void> {
    await this.mutex.run(async () => {
      await this.reader?.close();
      await this.writer.close();
    });
  }

  /** @internal */
  read<R>(tx: Tx | undefined, fn: (conn: SqliteConnection) => Promise<R>): Promise<R> {
    if (tx) return fn(tx.conn);
    if (this.reader) return fn(this.reader);
    return this.mutex.run(() => fn(this.writer));
  }

  /** @internal A write outside a transaction holds the writer for its few statements, so compare-and-swap is atomic. */
  write<R>(tx: Tx | undefined, fn: (conn: SqliteConnection, changes: StoreChange[]) => Promise<R>): Promise<R> {
    if (tx) return fn(tx.conn, tx.changes);
    return this.mutex.run(async () => {
      const changes: StoreChange[] = [];
      const result = await fn(this.writer, changes);
      this.publish(changes);
      return result;
    });
  }

  /** @internal */
  transaction<R>(fn: (tx: Tx) => Promise<R>): Promise<R> {
    return this.mutex.run(async () => {
      await this.writer.exec('BEGIN IMMEDIATE');
      const tx: Tx = { conn: this.writer, changes: [] };
      try {
        const result = await fn(tx);
        await this.writer.exec('COMMIT');
        this.publish(tx.changes);
        return result;
      } catch (err) {
        await this.writer.exec('ROLLBACK');
        throw err;
      }
    });
  }

  /** @internal */
  subscribe(listener: (change: StoreChange) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** @internal */
  cachedRow(key: string): Row | undefined {
    return this.rows.get(key);
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

  /** @internal Rows a single write (outside a transaction) just stored: cached once it is published. */
  private readonly written = new Map<string, Row>();

  /** @internal */
  noteWritten(key: string, row: Row): void {
    this.written.set(key, row);
  }

  private publish(changes: StoreChange[]): void {
    if (changes.length) this.changeCount++;
    for (const change of changes) this.rows.delete(rowKey(change.namespace, change.collection, change.project, change.name));
    for (const [key, row] of this.written) this.rememberRow(key, row, this.changeCount);
    this.written.clear();
    for (const change of changes) for (const listener of this.listeners) listener(change);
  }
}

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
    const ordered = [...steps].sort((a, b) => a.version - b.version);
    for (const step of ordered) {
      await this.core.transaction(async (tx) => {
        const row = await tx.conn.get<{ version: number }>('SELECT version FROM schema_versions WHERE namespace = ?', [this.namespace]);
        if ((row?.version ?? 0) >= step.version) return;
        await step.up(new NamespaceView(this.core, this.namespace, tx));
        await tx.conn.run('INSERT OR REPLACE INTO schema_versions (namespace, version) VALUES (?, ?)', [this.namespace, step.version]);
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

  private key(project: string, name: string): unknown[] {
    return [this.namespace, this.name, project, name];
  }

  get(project: string, name: string): Promise<StoredDoc<T> | undefined> {
    // Inside a transaction the transaction's own writes count: no cache there.
    const cacheKey = this.tx ? undefined : rowKey(this.namespace, this.name, project, name);
    const hit = cacheKey && this.core.cachedRow(cacheKey);
    if (hit) return Promise.resolve(toDoc<T>(hit));
    const stamp = this.core.readStamp();
    return this.core.read(this.tx, async (conn) => {
      const row = await conn.get<Row>(
        'SELECT project, name, rev, body FROM documents WHERE namespace = ? AND collection = ? AND project = ? AND name = ?',
        this.key(project, name),
      );
      if (row && cacheKey) this.core.rememberRow(cacheKey, row, stamp);
      return row && toDoc<T>(row);
    });
  }

  list(project?: string, namePrefix = ''): Promise<StoredDoc<T>[]> {
    return this.core.read(this.tx, async (conn) => {
      const params: unknown[] = [this.namespace, this.name];
      let sql = 'SELECT project, name, rev, body FROM documents WHERE namespace = ? AND collection = ?';
      if (project !== undefined) {
        sql += ' AND project = ?';
        params.push(project);
      }
      if (namePrefix) {
        sql += " AND substr(name, 1, ?) = ?";
        params.push(namePrefix.length, namePrefix);
      }
      const rows = await conn.all<Row>(`${sql} ORDER BY project, name`, params);
      return rows.map((row) => toDoc<T>(row));
    });
  }

  put(project: string, name: string, doc: T, expectedRev?: number): Promise<StoredDoc<T>> {
    return this.core.write(this.tx, async (conn, changes) => {
      // Outside a transaction the writer lock is held and the cache holds only committed rows:
      // a cached row's revision is the current one, and the read can be skipped.
      const cacheKey = this.tx ? undefined : rowKey(this.namespace, this.name, project, name);
      const cached = cacheKey ? this.core.cachedRow(cacheKey) : undefined;
      const current = cached ?? await conn.get<{ rev: number }>(
        'SELECT rev FROM documents WHERE namespace = ? AND collection = ? AND project = ? AND name = ?',
        this.key(project, name),
      );
      this.checkRevision(name, current?.rev, expectedRev);
      const rev = (current?.rev ?? 0) + 1;
      const body = JSON.stringify(doc);
      await conn.run(
        'INSERT OR REPLACE INTO documents (namespace, collection, project, name, rev, body) VALUES (?, ?, ?, ?, ?, ?)',
        [...this.key(project, name), rev, body],
      );
      changes.push({ namespace: this.namespace, collection: this.name, project, name, kind: 'put', rev });
      if (cacheKey) this.core.noteWritten(cacheKey, { project, name, rev, body });
      return { project, name, rev, doc };
    });
  }

  delete(project: string, name: string, expectedRev?: number): Promise<boolean> {
    return this.core.write(this.tx, async (conn, changes) => {
      const current = await conn.get<{ rev: number }>(
        'SELECT rev FROM documents WHERE namespace = ? AND collection = ? AND project = ? AND name = ?',
        this.key(project, name),
      );
      if (!current) return false;
      this.checkRevision(name, current.rev, expectedRev);
      await conn.run('DELETE FROM documents WHERE namespace = ? AND collection = ? AND project = ? AND name = ?', this.key(project, name));
      changes.push({ namespace: this.namespace, collection: this.name, project, name, kind: 'delete', rev: current.rev });
      return true;
    });
  }

  rename(project: string, name: string, newProject: string, newName: string): Promise<StoredDoc<T>> {
    return this.core.write(this.tx, async (conn, changes) => {
      const row = await conn.get<Row>(
        'SELECT project, name, rev, body FROM documents WHERE namespace = ? AND collection = ? AND project = ? AND name = ?',
        this.key(project, name),
      );
      if (!row) throw new RevisionMismatch(`"${name}"`);
      const taken = await conn.get<{ rev: number }>(
        'SELECT rev FROM documents WHERE namespace = ? AND collection = ? AND project = ? AND name = ?',
        this.key(newProject, newName),
      );
      if (taken) throw conflict(`"${newName}" already exists`);
      await conn.run(
        'UPDATE documents SET project = ?, name = ?, rev = rev + 1 WHERE namespace = ? AND collection = ? AND project = ? AND name = ?',
        [newProject, newName, ...this.key(project, name)],
      );
      changes.push({ namespace: this.namespace, collection: this.name, project, name, kind: 'delete', rev: row.rev });
      changes.push({ namespace: this.namespace, collection: this.name, project: newProject, name: newName, kind: 'put', rev: row.rev + 1 });
      return { project: newProject, name: newName, rev: row.rev + 1, doc: JSON.parse(row.body) as T };
    });
  }

  private checkRevision(name: string, current: number | undefined, expected: number | undefined): void {
    if (expected === undefined) return;
    if (expected === 0 && current !== undefined) throw conflict(`"${name}" already exists`);
    if (expected > 0 && current !== expected) throw new RevisionMismatch(`"${name}"`);
  }
}
