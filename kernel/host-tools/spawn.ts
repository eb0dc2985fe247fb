/** Long-running children with their streams: plain pipes, or a pseudo-terminal through node-pty. */
import { spawn as spawnChild, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { constants as osConstants } from 'node:os';
import { PassThrough, Writable } from 'node:stream';
import type { HostProcess, SpawnOptions } from '../../sdk/index.js';
import { Spawner, type SpawnedChild } from './spawner.js';

const require = createRequire(import.meta.url);

function signalNumber(signal: string | null): number {
  return signal ? (osConstants.signals as Record<string, number>)[signal] ?? 0 : 0;
}

/** Children launched with pipes start through the helper when it runs (spawner.ts): one for the daemon. */
const spawner = new Spawner();

/**
 * A child with three pipes: started by the helper when it runs (no fork on the event loop's thread, and
 * the death signal set without a setpriv in front), else by node's child_process.
 */
export function startPiped(command: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv; endWithDaemon?: boolean }): ChildProcess | SpawnedChild {
  const viaHelper = spawner.start(command, args, opts);
  if (viaHelper) return viaHelper;
  const [file, argv] = withDeathSignal(command, args, opts.endWithDaemon);
  return spawnChild(file, argv, { cwd: opts.cwd, env: opts.env, stdio: ['pipe', 'pipe', 'pipe'] });
}

/** `endWithDaemon`: the child is killed when the daemon dies (liblxc tools otherwise outlive it). */
export function spawnHostProcess(command: string, args: string[], opts: SpawnOptions): HostProcess {
  const [file, argv] = withDeathSignal(command, args, opts.endWithDaemon);
  return opts.pty ? spawnWithPty(file, argv, opts) : hostProcessOf(spawnChild(file, argv, { cwd: opts.cwd, env: opts.env, stdio: ['pipe', 'pipe', 'pipe'] }));
}

/** As spawnHostProcess, resolved once the child runs; with pipes, started by the helper beside the event loop. */
export async function launchHostProcess(command: string, args: string[], opts: SpawnOptions): Promise<HostProcess> {
  if (opts.pty) return spawnHostProcess(command, args, opts);
  const child = startPiped(command, args, { cwd: opts.cwd, env: opts.env, endWithDaemon: opts.endWithDaemon });
  const proc = hostProcessOf(child);
  await new Promise<void>((resolve) => {
    child.once('spawn', resolve);
    child.once('error', () => resolve());
  });
  return proc;
}

/** setpriv sets the parent death signal where the child is started by node itself. */
export function withDeathSignal(command: string, args: string[], endWithDaemon: boolean | undefined): [string, string[]] {
  return endWithDaemon ? ['setpriv', ['--pdeathsig', 'SIGKILL', '--', command, ...args]] : [command, args];
}

function hostProcessOf(child: ChildProcess | SpawnedChild): HostProcess {
  const exited = new Promise<number>((resolve) => {
    child.once('error', () => resolve(127));
    child.once('close', (code: number | null, signal: NodeJS.Signals | null) => resolve(code ?? 128 + signalNumber(signal)));
  });
  // A client that stops reading must not crash the daemon with EPIPE.
  child.stdin!.on('error', () => {});
  return {
    // Known at once through node; through the helper once it has started the child (launch resolves then).
    get pid() {
      return child.pid ?? -1;
    },
    stdin: child.stdin!,
    stdout: child.stdout!,
    stderr: child.stderr!,
    resize() {},
    kill(signal) {
      try { child.kill(signal); } catch { /* already gone */ }
    },
    exited,
  };
}

interface PtyModule {
  spawn(file: string, args: string[], opts: { cols: number; rows: number; cwd?: string; env?: Record<string, string>; name?: string }): {
    pid: number;
    write(data: string | Buffer): void;
    onData(cb: (data: string) => void): void;
    onExit(cb: (e: { exitCode: number; signal?: number }) => void): void;
    resize(cols: number, rows: number): void;
    kill(signal?: string): void;
    pause(): void;
    resume(): void;
  };
}

/** The terminal's default VEOF (ASCII EOT, ^D). */
const EOF_CHAR = '\x04';

function spawnWithPty(command: string, args: string[], opts: SpawnOptions): HostProcess {
  // Loaded on first use: only interactive sessions need it.
  const pty = require('node-pty') as PtyModule;
  const term = pty.spawn(command, args, {
    cols: opts.pty!.cols, rows: opts.pty!.rows, cwd: opts.cwd,
    env: opts.env ?? (process.env as Record<string, string>), name: 'xterm',
  });
  const stdout = new PassThrough();
  // Whoever reads stdout sets the pace: the terminal is not read while its output waits unread.
  term.onData((data) => {
    if (!stdout.write(data)) term.pause();
  });
  stdout.on('drain', () => term.resume());
  const exited = new Promise<number>((resolve) => {
    term.onExit(({ exitCode, signal }) => {
      stdout.end();
      resolve(signal ? 128 + signal : exitCode);
    });
  });
  let lastByte: number | undefined;
  const stdin = new Writable({
    write(chunk: Buffer, _enc, done) {
      if (chunk.length) lastByte = chunk[chunk.length - 1];
      try { term.write(chunk); } catch { /* exited */ }
      done();
    },
    // A terminal has no end of input but its EOF character (^D): alone on a line, a read returns 0.
    // After a partial line, the first one only hands that line over, so a second one follows.
    final(done) {
      const atLineStart = lastByte === undefined || lastByte === 0x0a || lastByte === 0x0d;
      try { term.write(atLineStart ? EOF_CHAR : EOF_CHAR + EOF_CHAR); } catch { /* exited */ }
      done();
    },
  });
  return {
    pid: term.pid,
    stdin,
    stdout,
    resize(cols, rows) {
      try { term.resize(cols, rows); } catch { /* exited */ }
    },
    kill(signal) {
      try {
        if (typeof signal === 'number') process.kill(term.pid, signal);
        else term.kill(signal);
      } catch { /* already gone */ }
    },
    exited,
  };
}
