/**
 * The state store: JSON documents in collections keyed by project and name, each with a revision.
 * Plugins see only their own namespace; there is no SQL outside the kernel's store module.
 */
import { ApiError } from './errors.js';

export interface StoredDoc<T> {
  project: string;
  name: string;
  /** Increments on every write of this document; starts at 1. */
  rev: number;
  doc: T;
}

export interface Collection<T> {
  get(project: string, name: string): Promise<StoredDoc<T> | undefined>;
  /** All documents of a project (or of every project when `project` is undefined), ordered by project then name. */
  list(project?: string, namePrefix?: string): Promise<StoredDoc<T>[]>;
  /**
   * Write a document. `expectedRev` 0 means it must not exist yet (409 if it does);
   * a positive value must match the stored revision (412 if it does not); undefined writes blindly.
   */
  put(project: string, name: string, doc: T, expectedRev?: number): Promise<StoredDoc<T>>;
  /** Returns false when there was nothing to delete. */
  delete(project: string, name: string, expectedRev?: number): Promise<boolean>;
  /** Move a document to a new key (rename), keeping its content; 409 if the target exists. */
  rename(project: string, name: string, newProject: string, newName: string): Promise<StoredDoc<T>>;
}

export interface StoreChange {
  namespace: string;
  collection: string;
  project: string;
  name: string;
  kind: 'put' | 'delete';
  rev: number;
}

export interface Migration {
  version: number;
  description: string;
  up(store: Store): Promise<void>;
}

export interface Store {
  readonly namespace: string;
  collection<T>(name: string): Collection<T>;
  /** Run `fn` atomically: everything it writes commits together or not at all. */
  transaction<R>(fn: (tx: Store) => Promise<R>): Promise<R>;
  /** Run this namespace's migrations that have not run yet, in version order, each in a transaction. */
  migrate(steps: Migration[]): Promise<void>;
  /** Change feed, after commit. Returns an unsubscribe function. */
  onChange(listener: (change: StoreChange) => void): () => void;
}

export class RevisionMismatch extends ApiError {
  constructor(what: string) {
    super(412, `${what} changed since it was read`);
  }
}
