/**
 * Disk mounts on a running container (hot-plug). liblxc makes a container's mounts at start from
 * its config; later ones are cloned on the host, idmapped through the container's user namespace
 * when the device asks for it (as `idmap=container` does at start) and attached inside its mount
 * namespace by mount-injection.py (the new mount syscalls, which Node lacks). The mounts each
 * device has, from start or hot-plug, are recorded next to the config so a detach after a daemon
 * restart still knows their targets.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { badRequest, internalError, type DeviceMount, type HostTools } from '../../sdk/index.js';

/** The helper is not compiled: it stays beside this file's source (dist/plugins/x/ -> plugins/x/). */
const HELPER = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'plugins', 'instance-lxc', 'mount-injection.py');

const TIMEOUT_MS = 30_000;

export interface RecordedMount {
  device: string;
  /** Path inside the container. */
  target: string;
}

/** The target as an absolute path inside the container, refused when it could climb out. */
export function containerTarget(target: string): string {
  const rel = target.replace(/^\/+/, '');
  if (rel === '' || rel.split('/').includes('..') || /[\0\n]/.test(rel)) throw badRequest(`Invalid mount path "${target}"`);
  return `/${rel}`;
}

/** One step of a batch: a mount attached at its target, or a target detached (and its place removed). */
export type InjectionStep = { attach: DeviceMount } | { detach: string; remove?: boolean };

/** A batch that stopped at a failed step: the steps before it were done. */
export class InjectionFailure extends Error {
  constructor(message: string, readonly done: number) {
    super(message);
  }
}

export class MountInjector {
  constructor(private readonly tools: HostTools) {}

  /**
   * Mount `m` inside the container whose init is `pid`. `shift` makes the mount idmapped, unless
   * the container shares the host's user namespace (privileged), as at start.
   */
  async attach(pid: number, m: DeviceMount): Promise<void> {
    await this.helper([HELPER, ...attachArgs(pid, m)], 'mount');
  }

  /** `remove`: the file left as mount point goes too (a device node's place). */
  async detach(pid: number, target: string, remove = false): Promise<void> {
    await this.helper([HELPER, ...detachArgs(pid, target, remove)], 'unmount');
  }

  /**
   * Several steps in one helper run (a hot-plug of many device nodes), in order; the first that
   * fails stops the batch with an InjectionFailure that says how many were done.
   */
  async batch(pid: number, steps: InjectionStep[]): Promise<void> {
    if (!steps.length) return;
    const ops = steps.map((s) => ('attach' in s ? attachArgs(pid, s.attach) : detachArgs(pid, s.detach, s.remove ?? false)));
    const res = await this.tools.run('python3', [HELPER, 'batch', JSON.stringify(ops)], { timeoutMs: TIMEOUT_MS, allowFailure: true });
    if (res.exitCode === 0) return;
    const done = Number(/done (\d+)\s*$/.exec(res.stdout)?.[1] ?? 0);
    const what = 'attach' in steps[done]! ? 'mount' : 'unmount';
    throw new InjectionFailure(`Failed to ${what} in the running container: ${res.stderr.trim() || `exit code ${res.exitCode}`}`, done);
  }

  private async helper(args: string[], what: string): Promise<void> {
    const res = await this.tools.run('python3', args, { timeoutMs: TIMEOUT_MS, allowFailure: true });
    if (res.exitCode !== 0) throw internalError(`Failed to ${what} in the running container: ${res.stderr.trim() || `exit code ${res.exitCode}`}`);
  }
}

function attachArgs(pid: number, m: DeviceMount): string[] {
  const args = ['attach', String(pid), m.source, containerTarget(m.target), m.file ? 'file' : 'dir', m.shift ? '1' : '0', m.readonly ? '1' : '0'];
  if (m.propagation) args.push(m.propagation);
  return args;
}

function detachArgs(pid: number, target: string, remove: boolean): string[] {
  return ['detach', String(pid), containerTarget(target), ...(remove ? ['remove'] : [])];
}
