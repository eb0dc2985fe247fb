/** Every child process goes through this service: logged, bounded in time, failures mapped to errors. */
import type { Readable, Writable } from 'node:stream';
import { ApiError } from './errors.js';

export interface RunOptions {
  /** Milliseconds before the process is killed (default 60 s). */
  timeoutMs?: number;
  input?: string | Buffer;
  cwd?: string;
  env?: Record<string, string>;
  /** Resolve with the exit code instead of throwing when the command fails. */
  allowFailure?: boolean;
  /**
   * Killed if the daemon dies (parent-death signal): for file work whose leftovers the next boot
   * removes, which an orphan still writing would race. Not for what must outlive the daemon.
   */
  endWithDaemon?: boolean;
}

export interface RunResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

export interface RememberedRunOptions extends RunOptions {
  /** Files besides the binary the answer depends on (a shared library the tool reports the version of). */
  dependsOn?: string[];
}

export interface SpawnOptions {
  cwd?: string;
  /** The whole environment of the child (default: the daemon's). */
  env?: Record<string, string>;
  /** Run under a new pseudo-terminal of this size instead of pipes (stdout then carries both streams). */
  pty?: { cols: number; rows: number };
  /** As RunOptions.endWithDaemon. */
  endWithDaemon?: boolean;
}

/** A long-running child with its streams, for exec and console sessions. */
export interface HostProcess {
  readonly pid: number;
  /** Ending it is end of input: the pipe closes, or under a pty the terminal's EOF character (^D) is typed. */
  readonly stdin: Writable;
  readonly stdout: Readable;
  /** Absent under a pty. */
  readonly stderr?: Readable;
  /** Resize the pty (no-op without one). */
  resize(cols: number, rows: number): void;
  kill(signal?: NodeJS.Signals | number): void;
  /** Exit code, or 128 + signal number when killed by a signal. */
  readonly exited: Promise<number>;
}

export interface HostTools {
  run(command: string, args: string[], opts?: RunOptions): Promise<RunResult>;
  /** Start a child whose streams the caller drives; it is not bounded in time. */
  spawn(command: string, args: string[], opts?: SpawnOptions): HostProcess;
  /**
   * As spawn, resolved once the child runs (its pid known). Without a pty the kernel starts it beside
   * the event loop: a fork and exec held the daemon ~2-3 ms a process under spawn (since SDK 2.12).
   * A child that could not start resolves with pid -1, its exit as 127.
   */
  launch?(command: string, args: string[], opts?: SpawnOptions): Promise<HostProcess>;
  /** Full path of a binary on PATH, or undefined. */
  which(command: string): Promise<string | undefined>;
  /**
   * As run, for a command whose answer depends only on files (its binary, `dependsOn`), such as a
   * `--version` probe at boot: a successful answer is kept in the data directory and given again, without
   * running the tool, while none of those files changed (since SDK 2.17). Use runRemembered() below.
   */
  runRemembered?(command: string, args: string[], opts?: RememberedRunOptions): Promise<RunResult>;
}

/** `tools.runRemembered` where the host tools have it, else a plain run. */
export function runRemembered(tools: HostTools, command: string, args: string[], opts: RememberedRunOptions = {}): Promise<RunResult> {
  if (tools.runRemembered) return tools.runRemembered(command, args, opts);
  const { dependsOn: _files, ...runOpts } = opts;
  return tools.run(command, args, runOpts);
}

export class HostToolError extends ApiError {
  readonly command: string;
  readonly exitCode: number | undefined;
  constructor(command: string, message: string, exitCode?: number) {
    super(500, message);
    this.command = command;
    this.exitCode = exitCode;
  }
}
