/** Every child process goes through this service: logged, bounded in time, failures mapped to errors. */
import { ApiError } from './errors.js';

export interface RunOptions {
  /** Milliseconds before the process is killed (default 60 s). */
  timeoutMs?: number;
  input?: string | Buffer;
  cwd?: string;
  env?: Record<string, string>;
  /** Resolve with the exit code instead of throwing when the command fails. */
  allowFailure?: boolean;
}

export interface RunResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

export interface HostTools {
  run(command: string, args: string[], opts?: RunOptions): Promise<RunResult>;
  /** Full path of a binary on PATH, or undefined. */
  which(command: string): Promise<string | undefined>;
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
