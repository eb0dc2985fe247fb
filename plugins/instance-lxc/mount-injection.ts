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

export class MountInjector {
  constructor(private readonly tools: HostTools) {}

  /**
   * Mount `m` inside the container whose init is `pid`. `shift` makes the mount idmapped, unless
   * the container shares the host's user namespace (privileged), as at start.
   */
  async attach(pid: number, m: DeviceMount): Promise<void> {
    const args = [HELPER, 'attach', String(pid), m.source, containerTarget(m.target), m.file ? 'file' : 'dir',
      m.shift ? '1' : '0', m.readonly ? '1' : '0'];
    if (m.propagation) args.push(m.propagation);
    await this.helper(args, 'mount');
  }

  /** `remove`: the file left as mount point goes too (a device node's place). */
  async detach(pid: number, target: string, remove = false): Promise<void> {
    await this.helper([HELPER, 'detach', String(pid), containerTarget(target), ...(remove ? ['remove'] : [])], 'unmount');
  }

  private async helper(args: string[], what: string): Promise<void> {
    const res = await this.tools.run('python3', args, { timeoutMs: TIMEOUT_MS, allowFailure: true });
    if (res.exitCode !== 0) throw internalError(`Failed to ${what} in the running container: ${res.stderr.trim() || `exit code ${res.exitCode}`}`);
  }
}
