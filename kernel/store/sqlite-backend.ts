/**
 * The standalone backend: sqlite (WAL, one file in the data dir). One writer at a time (the store's
 * mutex); a second read-only connection lets reads proceed while a transaction holds the writer.
 * No SQL leaves this file and sqlite.ts.
 */
import { SqliteConnection } from './sqlite.js';
import type { BackendDump, BackendReader, BackendWriter, DocAddress, Row, StoreBackend } from './backend.js';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS documents (
  namespace TEXT NOT NULL, collection TEXT NOT NULL, project TEXT NOT NULL, name TEXT NOT NULL,
  rev INTEGER NOT NULL, body TEXT NOT NULL,
  PRIMARY KEY (namespace, collection, project, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS schema_versions (namespace TEXT PRIMARY KEY, version INTEGER NOT NULL);
`;

const key = (at: DocAddress) => [at.namespace, at.collection, at.project, at.name];
const WHERE_KEY = 'namespace = ? AND collection = ? AND project = ? AND name = ?';

class SqliteReader implements BackendReader {
  constructor(protected readonly conn: SqliteConnection) {}

  get(at: DocAddress): Promise<Row | undefined> {
    return this.conn.get<Row>(`SELECT project, name, rev, body FROM documents WHERE ${WHERE_KEY}`, key(at));
  }

  list(namespace: string, collection: string, project?: string, namePrefix = ''): Promise<Row[]> {
    const params: unknown[] = [namespace, collection];
    let sql = 'SELECT project, name, rev, body FROM documents WHERE namespace = ? AND collection = ?';
    if (project !== undefined) {
      sql += ' AND project = ?';
      params.push(project);
    }
    if (namePrefix) {
      sql += ' AND substr(name, 1, ?) = ?';
      params.push(namePrefix.length, namePrefix);
    }
    return this.conn.all<Row>(`${sql} ORDER BY project, name`, params);
  }

  async schemaVersion(namespace: string): Promise<number> {
    const row = await this.conn.get<{ version: number }>('SELECT version FROM schema_versions WHERE namespace = ?', [namespace]);
    return row?.version ?? 0;
  }
}

class SqliteWriter extends SqliteReader implements BackendWriter {
  readonly retry = false;

  assume(): boolean {
    // The writer is held: a row the cache holds is the committed one, nothing to check at commit.
    return true;
  }

  async put(at: DocAddress, rev: number, body: string): Promise<void> {
    await this.conn.run('INSERT OR REPLACE INTO documents (namespace, collection, project, name, rev, body) VALUES (?, ?, ?, ?, ?, ?)', [...key(at), rev, body]);
  }

  async delete(at: DocAddress): Promise<void> {
    await this.conn.run(`DELETE FROM documents WHERE ${WHERE_KEY}`, key(at));
  }

  async setSchemaVersion(namespace: string, version: number): Promise<void> {
    await this.conn.run('INSERT OR REPLACE INTO schema_versions (namespace, version) VALUES (?, ?)', [namespace, version]);
  }
}

export class SqliteBackend extends SqliteReader implements StoreBackend {
  readonly kind = 'sqlite';
  readonly reachable = true;

  private constructor(private readonly writer: SqliteConnection, reader: SqliteConnection) {
    super(reader);
  }

  /** `file` is a path, or ':memory:' for tests. */
  static async open(file: string): Promise<SqliteBackend> {
    const writer = await SqliteConnection.open(file);
    if (file !== ':memory:') {
      await writer.exec('PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=5000;');
    }
    await writer.exec(SCHEMA);
    // In memory there is one database per connection: reads use the writer (the store serialises them).
    const reader = file === ':memory:' ? writer : await SqliteConnection.open(file, true);
    return new SqliteBackend(writer, reader);
  }

  /** True when reads go through the writer (':memory:'): the store must then serialise them with writes. */
  get readsNeedWriter(): boolean {
    return this.conn === this.writer;
  }

  /** The store holds its mutex around this: one writer at a time. A single write needs no BEGIN. */
  async write<R>(work: (w: BackendWriter) => Promise<R>, single: boolean): Promise<R> {
    const w = new SqliteWriter(this.writer);
    if (single) return work(w);
    await this.writer.exec('BEGIN IMMEDIATE');
    try {
      const result = await work(w);
      await this.writer.exec('COMMIT');
      return result;
    } catch (err) {
      await this.writer.exec('ROLLBACK');
      throw err;
    }
  }

  async dump(): Promise<BackendDump> {
    const docs = await this.conn.all<{ namespace: string; collection: string; project: string; name: string; rev: number; body: string }>(
      'SELECT namespace, collection, project, name, rev, body FROM documents ORDER BY namespace, collection, project, name',
    );
    const versions = await this.conn.all<{ namespace: string; version: number }>('SELECT namespace, version FROM schema_versions');
    return { docs, versions: new Map(versions.map((v) => [v.namespace, v.version])) };
  }

  async load(dump: BackendDump): Promise<void> {
    await this.write(async (w) => {
      for (const doc of dump.docs) await w.put(doc, doc.rev, doc.body);
      for (const [namespace, version] of dump.versions) await w.setSchemaVersion(namespace, version);
    }, false);
  }

  async close(): Promise<void> {
    if (this.conn !== this.writer) await this.conn.close();
    await this.writer.close();
  }
}
