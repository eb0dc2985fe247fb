/**
 * One command run to its end, its output collected: what HostTools.run needs of a child process,
 * started as spawn.ts starts children with pipes (the helper, else node's child_process). It replaced
 * execa, whose hundred modules cost a daemon ~1 MiB and ~120 ms of CPU at the first host tool, which
 * every boot runs (decision 0002, issue 21). It keeps what run() relied on: the environment extends the
 * daemon's, a timeout sends SIGTERM then SIGKILL 5 s later, a final newline is stripped, output is
 * capped at 100 MiB, and children still running when the daemon exits are killed with it.
 */
import type { ChildProcess } from 'node:child_process';
import { startPiped } from './spawn.js';
import type { SpawnedChild } from './spawner.js';

export interface CommandOptions {
  timeoutMs: number;
  input?: string | Buffer;
  cwd?: string;
  env?: Record<string, string>;
  /** The child dies with the daemon (its parent death signal). */
  endWithDaemon?: boolean;
}

export interface CommandResult {
  stdout: string;
  stderr: string;
  /** Undefined when the command did not exit by itself (a signal, a failure to start, the output cap). */
  exitCode?: number;
  timedOut: boolean;
  /** Why there is no exit code, in a few words. */
  failure?: string;
}

const MAX_OUTPUT_BYTES = 100 * 1024 * 1024;
const FORCE_KILL_AFTER_MS = 5_000;

/** Children of run() still running: a daemon that exits takes them along (a bounded command is its own work). */
const running = new Set<ChildProcess | SpawnedChild>();
let exitHooked = false;
function track(child: ChildProcess | SpawnedChild): void {
  if (!exitHooked) {
    exitHooked = true;
    process.once('exit', () => { for (const c of running) c.kill('SIGTERM'); });
  }
  running.add(child);
}

const stripFinalNewline = (text: string) => (text.endsWith('\r\n') ? text.slice(0, -2) : text.endsWith('\n') ? text.slice(0, -1) : text);

export function runCommand(file: string, args: string[], opts: CommandOptions): Promise<CommandResult> {
  return new Promise((resolve) => {
    const child = startPiped(file, args, { cwd: opts.cwd, env: opts.env ? { ...process.env, ...opts.env } : undefined, endWithDaemon: opts.endWithDaemon });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let bytes = 0;
    let timedOut = false;
    let failure: string | undefined;
    let forceKill: NodeJS.Timeout | undefined;
    const kill = () => {
      child.kill('SIGTERM');
      forceKill ??= setTimeout(() => child.kill('SIGKILL'), FORCE_KILL_AFTER_MS).unref();
    };
    const collect = (into: Buffer[]) => (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes > MAX_OUTPUT_BYTES) {
        failure ??= `output over ${MAX_OUTPUT_BYTES} bytes`;
        kill();
        return;
      }
      into.push(chunk);
    };
    child.stdout!.on('data', collect(out));
    child.stderr!.on('data', collect(err));
    // A command that exits without reading its input must not fail the run with EPIPE.
    child.stdin!.on('error', () => {});
    child.stdin!.end(opts.input);
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, opts.timeoutMs);
    let settled = false;
    const finish = (exitCode: number | undefined) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (forceKill) clearTimeout(forceKill);
      running.delete(child);
      resolve({
        stdout: stripFinalNewline(Buffer.concat(out).toString('utf8')),
        stderr: stripFinalNewline(Buffer.concat(err).toString('utf8')),
        exitCode: failure || timedOut ? undefined : exitCode,
        timedOut,
        failure,
      });
    };
    child.once('error', (e: NodeJS.ErrnoException) => {
      failure ??= `cannot run ${file}: ${e.code ?? e.message}`;
      // A child that never started sends no 'close'.
      if (child.pid === undefined) finish(undefined);
    });
    child.once('close', (code: number | null, signal: NodeJS.Signals | null) => {
      if (signal) failure ??= `killed by ${signal}`;
      finish(code ?? undefined);
    });
    // Through the helper the pid comes later: a kill before it is delivered once it does.
    track(child);
  });
}
