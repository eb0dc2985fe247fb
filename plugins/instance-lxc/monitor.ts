/**
 * Which containers run, without asking liblxc: `lxc-start -p` leaves the pid of the container's
 * monitor in a file (liblxc removes it at stop); the monitor names itself `[lxc monitor] <lxcpath>
 * <name>` and its child is the container's init. All of it lives on disk and in /proc, so a
 * restarted daemon sees exactly what the previous one started. The table only caches what was
 * found; each lookup re-checks that the monitor is still there (one small read). A container found
 * stopped stays so without another look until the driver forgets it after its own `lxc-start`: a
 * pid file in this lxcpath comes from nothing else.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { CgroupHost, ContainerCgroup, readText } from './cgroups.js';
import type { LxcPaths } from './paths.js';

export interface RunningContainer {
  monitorPid: number;
  /** Absent for the instant between the monitor's start and its fork of init. */
  initPid?: number;
  cgroup?: ContainerCgroup;
  /** Whether it was frozen when revision() last looked. */
  frozenSeen?: boolean;
  /** The cgroup files a state read needs (worked out once: the layout does not change while it runs). */
  stateFiles?: string[];
  /** The same for a metrics read. */
  metricsFiles?: string[];
}

export class MonitorTable {
  private readonly cache = new Map<string, RunningContainer>();
  /**
   * Names whose pid file was missing when last looked for and that were not forgotten since. Only
   * `lxc-start`, after which the driver forgets the name, makes a pid file: a stopped
   * container is told without a stat (most of a listing of thousands was those stats).
   */
  private readonly absent = new Set<string>();
  /** Moves with every change of what the table tells (revision()). */
  private changes = 0;

  constructor(private readonly paths: LxcPaths, private readonly host: CgroupHost) {}

  private isMonitor(pid: number, name: string): boolean {
    const cmdline = readText(`/proc/${pid}/cmdline`);
    return cmdline !== undefined && cmdline.replace(/\0+$/, '') === `[lxc monitor] ${this.paths.lxcpath} ${name}`;
  }

  private readPidFile(name: string): number | undefined {
    // Most listed containers are stopped: a stat is far cheaper than a read that throws ENOENT.
    if (!existsSync(this.paths.pidFile(name))) {
      this.absent.add(name);
      this.changes++;
      return undefined;
    }
    try {
      const pid = Number(readFileSync(this.paths.pidFile(name), 'utf8').trim());
      return Number.isInteger(pid) && pid > 0 ? pid : undefined;
    } catch {
      return undefined;
    }
  }

  /** The monitor's child whose cgroup is a liblxc payload: the container's init. */
  private attachInit(entry: RunningContainer): void {
    const children = readText(`/proc/${entry.monitorPid}/task/${entry.monitorPid}/children`)?.trim();
    if (!children) return;
    for (const child of children.split(/\s+/).map(Number)) {
      const cgroup = ContainerCgroup.ofProcess(this.host, child);
      if (cgroup?.isPayload) {
        entry.initPid = child;
        entry.cgroup = cgroup;
        return;
      }
    }
  }

  find(name: string): RunningContainer | undefined {
    // Most of a large listing: never in the cache (forget() and a look that found no file keep them apart).
    if (this.absent.has(name)) return undefined;
    const cached = this.cache.get(name);
    if (cached && this.isMonitor(cached.monitorPid, name)) {
      if (cached.initPid === undefined) this.attachInit(cached);
      return cached;
    }
    if (this.cache.delete(name)) this.changes++;
    const pid = this.readPidFile(name);
    if (pid === undefined || !this.isMonitor(pid, name)) return undefined;
    const entry: RunningContainer = { monitorPid: pid };
    this.attachInit(entry);
    this.cache.set(name, entry);
    this.changes++;
    return entry;
  }

  /** Look again next time (after an `lxc-start`, and while waiting for a monitor to go). */
  forget(name: string): void {
    const running = this.cache.delete(name);
    const stopped = this.absent.delete(name);
    if (running || stopped) this.changes++;
  }

  /**
   * A number that moves whenever a status the table tells may have changed: a container found
   * running or stopped, a monitor gone, a freezer state flipped, a name forgotten. Each call looks at
   * every running container (a /proc read and a cgroup read, what telling its status costs); a
   * stopped one costs nothing, since only the driver's own start, which forgets its name, changes it.
   */
  revision(): number {
    for (const [name, entry] of this.cache) {
      if (!this.isMonitor(entry.monitorPid, name)) {
        this.cache.delete(name);
        this.changes++;
        continue;
      }
      if (entry.initPid === undefined) this.attachInit(entry);
      const frozen = entry.cgroup?.frozen() ?? false;
      if (frozen !== entry.frozenSeen) {
        entry.frozenSeen = frozen;
        this.changes++;
      }
    }
    return this.changes;
  }
}

/**
 * Every monitor process of a container, found by scanning /proc (its pid file may already be gone).
 * Only for the failure path: a scan costs one read per process on the host.
 */
export function monitorProcesses(lxcpath: string, name: string): number[] {
  const wanted = `[lxc monitor] ${lxcpath} ${name}`;
  return readdirSync('/proc').filter((p) => /^\d+$/.test(p)).map(Number)
    .filter((pid) => readText(`/proc/${pid}/cmdline`)?.replace(/\0+$/, '') === wanted);
}
