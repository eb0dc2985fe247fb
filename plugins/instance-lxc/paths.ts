/**
 * Where the driver keeps its per-instance files: one liblxc container directory per instance
 * under `<dataDir>/containers` (the lxcpath), named like the instance's volume and log directory.
 */
import path from 'node:path';

/** The liblxc container name: the instance name in the default project, `<project>_<name>` elsewhere. */
export function lxcName(project: string, name: string): string {
  return project === 'default' ? name : `${project}_${name}`;
}

export class LxcPaths {
  constructor(readonly lxcpath: string) {}

  dir(name: string): string {
    return path.join(this.lxcpath, name);
  }

  /** Generated at every start; liblxc reads it from here (`lxc-start -n name -P lxcpath`). */
  config(name: string): string {
    return path.join(this.lxcpath, name, 'config');
  }

  /** Pid of the container's monitor process, written by `lxc-start -p` and removed by liblxc at stop. */
  pidFile(name: string): string {
    // Asked for every instance of every listing: built once per name.
    let file = this.pidFiles.get(name);
    if (file === undefined) this.pidFiles.set(name, (file = path.join(this.lxcpath, name, 'monitor.pid')));
    return file;
  }

  private readonly pidFiles = new Map<string, string>();

  /** The id map applied at the last start, read when another isolated map must be placed. */
  idmapFile(name: string): string {
    return path.join(this.lxcpath, name, 'idmap.json');
  }

  /** The network interfaces the container has (device, interface, host-side name). */
  nicsFile(name: string): string {
    return path.join(this.lxcpath, name, 'nics.json');
  }

  /** The seccomp profile (security.syscalls.*), written at every start. */
  seccompProfile(name: string): string {
    return path.join(this.lxcpath, name, 'seccomp.profile');
  }

  /** What the seccomp proxy may do for the container (interceptionPolicy()), read by the proxy at each intercepted mount. */
  seccompPolicy(name: string): string {
    return path.join(this.lxcpath, name, 'seccomp.intercept');
  }

  /** The device nodes each unix-char/unix-block device has (unix-nodes.ts). */
  unixNodesFile(name: string): string {
    return path.join(this.lxcpath, name, 'unix-nodes.json');
  }

  /** The disk mounts each device has (targets inside the container), for detach. */
  mountsFile(name: string): string {
    return path.join(this.lxcpath, name, 'mounts.json');
  }
}
