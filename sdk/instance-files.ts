/**
 * Files of a running instance reached through its driver rather than through its root filesystem
 * on the host: a virtual machine's disk is the guest's, and only its agent can read it. The
 * instances family's file routes use a driver's `files` when it offers one, and keep the same
 * X-LXD-* header semantics as for containers.
 */
import type { Readable } from 'node:stream';

export interface InstanceFileInfo {
  kind: 'file' | 'directory' | 'symlink';
  uid: number;
  gid: number;
  /** Permission bits (mode & 0o7777). */
  mode: number;
  mtime: Date;
}

/** An entry as GET answers it: a symlink is not followed. */
export type InstanceFileEntry =
  | { kind: 'file'; info: InstanceFileInfo; content: Readable }
  | { kind: 'directory'; info: InstanceFileInfo; entries: string[] }
  | { kind: 'symlink'; info: InstanceFileInfo; target: string };

export interface InstanceFilePut {
  type: 'file' | 'directory' | 'symlink';
  /** Applied to what is created; an existing file keeps its own (as `lxc file push` expects). */
  uid?: number;
  gid?: number;
  mode?: number;
  /** Append to an existing file (which must exist) instead of replacing its content. */
  append: boolean;
  /** `file`: the new content. */
  content?: Readable;
  /** `symlink`: where it points. */
  target?: string;
}

export interface InstanceFiles {
  /** Paths are absolute and normalised (the routes see to it). */
  get(path: string): Promise<InstanceFileEntry>;
  /** A directory is made with its missing parents. */
  put(path: string, spec: InstanceFilePut): Promise<void>;
  /** A file, a symlink or an empty directory. */
  delete(path: string): Promise<void>;
}

/** What InstanceFiles rejects with when the instance says no: an errno name in `code` (ENOENT, EACCES...). */
export class InstanceFileError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
    this.name = 'InstanceFileError';
  }
}
