/**
 * Commands inside a running container through `lxc-attach`. With pipes, stdout and stderr stay
 * apart; under a pty (interactive), lxc-attach sees a terminal and gives the command a pty of the
 * container's own, resized along with ours. lxc-attach does not forward signals, so a signal
 * goes straight to the command: lxc-attach's child inside the container's pid namespace.
 */
import { existsSync, lstatSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Writable } from 'node:stream';
import { badRequest, type ExecSession, type ExecSpec, type HostTools } from '../../sdk/index.js';
import { childrenOf, descendantsOf } from './process-tree.js';

/**
 * lxc-attach has no working-directory option (it keeps the caller's when the container has the
 * same path). The container's own shell changes directory, with the path and the command passed
 * as arguments, never spliced into the script. A missing directory falls back to `/`, as the
 * reference's exec does.
 */
const CHDIR_THEN_EXEC = 'cd "$1" 2>/dev/null || cd /; shift; exec "$@"';

/**
 * attach-order.c, built by `npm run build`: preloaded into lxc-attach, it orders liblxc's attach
 * so that a container with intercepted syscalls never gets an exec session without its listener
 * (a silent exit 1, and ENOSYS inside). Without it (not built) lxc-attach runs as it is.
 */
const ATTACH_ORDER = path.join(path.dirname(fileURLToPath(import.meta.url)), 'corral-attach-order.so');
let attachEnv: Record<string, string> | undefined;

/** The environment lxc-attach runs with (--clear-env keeps it from the command itself). */
function lxcAttachEnv(): Record<string, string> | undefined {
  if (!attachEnv && existsSync(ATTACH_ORDER)) {
    const preload = [ATTACH_ORDER, process.env.LD_PRELOAD].filter(Boolean).join(' ');
    attachEnv = { ...(process.env as Record<string, string>), LD_PRELOAD: preload };
  }
  return attachEnv;
}

/** How long interactive input waits for the command to be attached before it is written anyway. */
const ATTACH_WAIT_MS = 2_000;
const ATTACH_POLL_MS = 10;

export interface AttachTarget {
  lxcpath: string;
  name: string;
  initPid: number;
  /** Host path of the container's root filesystem (to check it has a shell). */
  rootfs: string;
}

function hasShell(rootfs: string): boolean {
  try {
    lstatSync(path.join(rootfs, 'bin/sh'));
    return true;
  } catch {
    return false;
  }
}

export function attachArgs(target: AttachTarget, spec: ExecSpec): string[] {
  // -q: liblxc's own log lines would otherwise land in the command's stderr.
  const args = ['-q', '-n', target.name, '-P', target.lxcpath, '--clear-env'];
  for (const [key, value] of Object.entries(spec.environment)) {
    if (key === '' || key.includes('=') || key.includes('\0') || value.includes('\0')) throw badRequest(`Invalid environment variable "${key}"`);
    args.push('-v', `${key}=${value}`);
  }
  if (spec.user !== undefined || spec.group !== undefined) args.push('-u', String(spec.user ?? 0), '-g', String(spec.group ?? 0));
  args.push('--');
  let cwd = spec.cwd || spec.environment.HOME || '/';
  if (!cwd.startsWith('/')) cwd = `/${cwd}`;
  if (cwd !== '/' && hasShell(target.rootfs)) args.push('/bin/sh', '-c', CHDIR_THEN_EXEC, 'sh', cwd, ...spec.command);
  else args.push(...spec.command);
  return args;
}

function pidNamespace(pid: number): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return undefined;
  }
}

export async function startExec(hostTools: HostTools, target: AttachTarget, spec: ExecSpec): Promise<ExecSession> {
  const args = attachArgs(target, spec);
  const options = {
    // The daemon's cwd may not exist in the container; `/` always does (and is the default).
    cwd: '/',
    env: lxcAttachEnv(),
    pty: spec.interactive ? { cols: spec.width || 80, rows: spec.height || 25 } : undefined,
    // A daemon that dies leaves no lxc-attach behind; the command then sees its input and output close.
    endWithDaemon: true,
  };
  // Started beside the event loop where the kernel can (a fork and exec per `lxc exec` held it otherwise).
  const proc = hostTools.launch ? await hostTools.launch('lxc-attach', args, options) : hostTools.spawn('lxc-attach', args, options);
  let done = false;
  const exited = proc.exited.then((code) => {
    done = true;
    return code;
  });
  const containerNs = pidNamespace(target.initPid);

  /** lxc-attach's child once it has entered the container (before that it is still on the host side). */
  const command = (): number | undefined => {
    for (const child of childrenOf(proc.pid)) {
      if (containerNs && pidNamespace(child) === containerNs) return child;
    }
    return undefined;
  };

  /**
   * SIGKILL the command and all it started, then lxc-attach (which would otherwise wait for them).
   * Repeated while new processes show up: one may fork while the tree is being read.
   */
  const terminate = (): void => {
    if (done) return;
    for (let round = 0; round < 5; round++) {
      const tree = descendantsOf(proc.pid);
      if (!tree.length) break;
      for (const pid of tree) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch { /* already gone */ }
      }
    }
    proc.kill('SIGKILL');
  };

  const deliver = (signal: number, attempt: number): void => {
    if (done) return;
    const pid = command();
    if (pid !== undefined) {
      try {
        process.kill(pid, signal);
      } catch { /* it just exited */ }
      return;
    }
    // Not attached yet: try again shortly; after a second, signal lxc-attach itself.
    if (attempt < 100) setTimeout(() => deliver(signal, attempt + 1), 10).unref();
    else proc.kill(signal);
  };

  /** Resolves once the command runs in the container (or lxc-attach ended, or the wait ran out). */
  const attached = () => new Promise<void>((resolve) => {
    const started = Date.now();
    const poll = () => {
      if (done || command() !== undefined || Date.now() - started > ATTACH_WAIT_MS) resolve();
      else setTimeout(poll, ATTACH_POLL_MS).unref();
    };
    poll();
  });

  return {
    // Under a pty, lxc-attach makes our terminal raw just before it attaches, and that flushes
    // whatever input is pending on it: input (and its end, ^D) waits until then.
    stdin: spec.interactive ? heldUntil(attached(), proc.stdin) : proc.stdin,
    stdout: proc.stdout,
    stderr: proc.stderr,
    resize: (cols, rows) => proc.resize(cols, rows),
    signal: (signal) => deliver(signal, 0),
    terminate,
    exited,
  };
}

/** A writable that passes everything to `target` once `open` has resolved, in order, its end included. */
function heldUntil(open: Promise<void>, target: Writable): Writable {
  return new Writable({
    write(chunk: Buffer, _enc, done) {
      void open.then(() => {
        target.write(chunk);
        done();
      });
    },
    final(done) {
      void open.then(() => {
        target.end();
        done();
      });
    },
  });
}
