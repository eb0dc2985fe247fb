/**
 * What the qemu driver asks of the guest agent's host side (agent/client.ts implements it). The
 * agent runs inside the guest and is reached over a virtio-serial port whose host end is a unix
 * socket of the daemon (see the VM guest agent decision): one connection per running VM.
 */
import type { Readable } from 'node:stream';
import type { ExecSession, ExecSpec, NetworkState } from '../../../sdk/index.js';

/** What the guest reports of itself (`lxc info`). */
export interface GuestState {
  processes: number;
  memory: { usage: number; total: number };
  /** CPU time used by the guest, nanoseconds. */
  cpuNs: number;
  network: Record<string, NetworkState>;
}

export interface GuestFileInfo {
  kind: 'file' | 'directory' | 'symlink';
  uid: number;
  gid: number;
  /** Permission bits only. */
  mode: number;
  mtime?: Date;
}

export interface GuestFileWrite {
  kind: 'file' | 'directory' | 'symlink';
  /** -1: left as they are (an existing entry's, or the agent's defaults: root, 0644 or 0755). */
  uid: number;
  gid: number;
  mode: number;
  /** `file`: the new content; `symlink`: unused. */
  content?: Readable;
  /** `symlink`: where it points. */
  target?: string;
  append?: boolean;
}

export interface GuestAgent {
  /** Whether the agent has answered the greeting on the current connection. */
  readonly connected: boolean;
  /** Resolves once the agent answers (waits for it to come up); rejects after `timeoutMs`. */
  ready(timeoutMs: number): Promise<void>;
  exec(spec: ExecSpec): Promise<ExecSession>;
  /** Rejects with an error carrying an errno name in `code` (ENOENT, EACCES...). */
  stat(path: string): Promise<GuestFileInfo>;
  readFile(path: string): Promise<{ info: GuestFileInfo; content: Readable }>;
  readDirectory(path: string): Promise<{ info: GuestFileInfo; entries: string[] }>;
  readLink(path: string): Promise<{ info: GuestFileInfo; target: string }>;
  write(path: string, file: GuestFileWrite): Promise<void>;
  remove(path: string): Promise<void>;
  state(): Promise<GuestState>;
  /** Drop the connection and end every session on it. */
  close(): void;
}

/** Opens the agent of one VM through its host-side socket (reconnecting while the VM runs). */
export type AgentConnector = (socketPath: string) => GuestAgent;
