/**
 * Commands inside a running container through `lxc-attach`. With pipes, stdout and stderr stay
 * apart; under a pty (interactive), lxc-attach sees a terminal and gives the command a pty of the
 * container's own, resized along with ours. lxc-attach does not forward signals, so a signal
 * goes straight to the command: lxc-attach's child inside the container's pid namespace.
 */
import { lstatSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { badRequest, type ExecSession, type ExecSpec, type HostTools } from '../../sdk/index.js';
import { readText } from './cgroups.js';

/**
 * lxc-attach has no working-directory option (it keeps the caller's when the container has the
 * same path). The container's own shell changes directory, with the path and the command passed
 * as arguments, never spliced into the script. A missing directory falls back to `/`, as the
 * reference's exec does.
 */
const CHDIR_THEN_EXEC = 'cd "$1" 2>/dev/null || cd /; shift; exec "$@"';

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

export function startExec(hostTools: HostTools, target: AttachTarget, spec: ExecSpec): ExecSession {
  const args = attachArgs(target, spec);
  // The daemon's cwd may not exist in the container; `/` always does (and is the default).
  const proc = hostTools.spawn('lxc-attach', args, {
    cwd: '/',
    pty: spec.interactive ? { cols: spec.width || 80, rows: spec.height || 25 } : undefined,
  });
  let done = false;
  const exited = proc.exited.then((code) => {
    done = true;
    return code;
  });
  const containerNs = pidNamespace(target.initPid);

  /** lxc-attach's child once it has entered the container (before that it is still on the host side). */
  const command = (): number | undefined => {
    const children = readText(`/proc/${proc.pid}/task/${proc.pid}/children`)?.trim();
    for (const child of children ? children.split(/\s+/).map(Number) : []) {
      if (containerNs && pidNamespace(child) === containerNs) return child;
    }
    return undefined;
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

  return {
    stdin: proc.stdin,
    stdout: proc.stdout,
    stderr: proc.stderr,
    resize: (cols, rows) => proc.resize(cols, rows),
    signal: (signal) => deliver(signal, 0),
    exited,
  };
}
