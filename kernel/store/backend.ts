/**
 * Where the document store keeps its rows: sqlite standalone, etcd once clustered. The document store
 * (revisions, compare-and-swap, cache, change feed) sits above this and is the same for both.
 */
import type { StoreChange } from '../../sdk/index.js';

/** One document as a backend stores it: the sdk revision and the JSON body. */
export interface Row {
  project: string;
  name: string;
  rev: number;
  body: string;
  /** The backend's own version of the row (etcd's mod revision), checked again at commit. */
  version?: number;
}

export interface DocAddress {
  namespace: string;
  collection: string;
  project: string;
  name: string;
}

export interface BackendReader {
  get(at: DocAddress): Promise<Row | undefined>;
  /** Ordered by project then name. */
  list(namespace: string, collection: string, project?: string, namePrefix?: string): Promise<Row[]>;
  schemaVersion(namespace: string): Promise<number>;
}

/** What a write sees: reads include its own writes; nothing is visible to others before commit. */
export interface BackendWriter extends BackendReader {
  /** Set when an optimistic backend runs the work again after another writer got in the way. */
  readonly retry: boolean;
  /** Count `row` (from the store's cache) as read without asking the backend again; false when it cannot. */
  assume(at: DocAddress, row: Row): boolean;
  /** After commit: the backend's version of every row written (etcd's revision of the commit). */
  readonly committed?: number;
  put(at: DocAddress, rev: number, body: string): Promise<void>;
  delete(at: DocAddress): Promise<void>;
  setSchemaVersion(namespace: string, version: number): Promise<void>;
}

/** Every document and schema version, for copying one backend into another. */
export interface BackendDump {
  docs: (DocAddress & { rev: number; body: string })[];
  versions: Map<string, number>;
}

export interface StoreBackend extends BackendReader {
  readonly kind: 'sqlite' | 'etcd';
  /** False while the backend cannot answer (etcd without quorum): cached rows are not served then either. */
  readonly reachable: boolean;
  /** Reads are answered from the backend's own copy, checked current: the store's row cache is not used for them. */
  readonly mirrored?: boolean;
  /**
   * Run `work` atomically. `single` marks one write outside a plugin transaction (a backend may skip
   * its transaction machinery). An optimistic backend may run `work` again (with `retry` set).
   */
  write<R>(work: (w: BackendWriter) => Promise<R>, single: boolean): Promise<R>;
  /** Changes committed by other writers (other cluster members), after commit; `resync` when some may have been missed. */
  watchOthers?(changes: (list: StoreChange[]) => void, resync: () => void): Promise<void>;
  dump(): Promise<BackendDump>;
  /** Copy a dump into this (empty) backend, revisions kept. */
  load(dump: BackendDump): Promise<void>;
  close(): Promise<void>;
}

/** The row cache's and the diff's key of one document. */
export const addressKey = (at: DocAddress) => `${at.namespace}\0${at.collection}\0${at.project}\0${at.name}`;
