/**
 * The host's interfaces for /1.0/networks, in the kernel's order (by index), each with the type the
 * API shows. Typing an interface takes several sysfs reads, which made a listing cost ten times the
 * rest of the request: the typed list is kept while it holds.
 *
 * It holds while no link changed. Two checks, both needed:
 * - the names in /sys/class/net are read on every listing (one directory read): an interface made or
 *   removed, by corral (a network, a container's NIC) or anyone, is seen at once;
 * - `ip -o monitor link` (one process for the daemon, started at the first listing) reports every
 *   link change; any line drops the list. That covers an interface replaced under the same name by one
 *   of another kind, which the names alone do not show.
 * Without the monitor (it failed to start, or exited too often), nothing is kept.
 */
import type Logger from 'bunyan';
import { readFileSync } from 'node:fs';
import type { HostProcess, HostTools } from '../../sdk/index.js';
import { hostInterfaceNames, hostInterfaceType } from './host-interfaces.js';

export interface HostInterface {
  name: string;
  type: string;
}

/** Monitor restarts allowed within a minute before the list stops being kept. */
const MONITOR_RESTARTS_PER_MINUTE = 5;
const MONITOR_RESTART_DELAY_MS = 1_000;
/** How long after its start the monitor is trusted to have subscribed to link changes. */
const MONITOR_SETTLE_MS = 200;

const ifindex = (name: string): number => {
  try {
    return Number.parseInt(readFileSync(`/sys/class/net/${name}/ifindex`, 'utf8'), 10);
  } catch {
    return Number.MAX_SAFE_INTEGER;
  }
};

export class HostInterfaceList {
  /** The last list, with the names it was made for and the monitor's count of link changes then. */
  private kept: { names: string; linkChanges: number; list: readonly HostInterface[] } | undefined;
  private monitor: HostProcess | undefined;
  /** When the monitor was started: it reports nothing from before it subscribed, a moment later. */
  private monitorSince = 0;
  private starts: number[] = [];
  private restartTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  /** Bumped by every line of the monitor and every start or end of it: a list kept from before does not hold. */
  private linkChanges = 0;

  constructor(private readonly tools: HostTools, private readonly log: Logger) {}

  /**
   * Equal while no link changed as far as the monitor tells; undefined without a settled monitor (a
   * change could go unseen). The monitor hears of a change made outside the daemon a moment after it is
   * made: a kept answer can show the host as it was that long (the daemon's own changes are tracked by
   * the kernel, and a listing during one is made afresh).
   */
  revision(): string | undefined {
    return this.watched() ? String(this.linkChanges) : undefined;
  }

  private watched(): boolean {
    return this.monitor !== undefined && Date.now() - this.monitorSince > MONITOR_SETTLE_MS;
  }

  /** The interfaces now, by index. */
  list(): readonly HostInterface[] {
    if (!this.monitor && !this.stopped && !this.restartTimer) this.startMonitor();
    const names = hostInterfaceNames();
    const key = names.join('/');
    const watched = this.watched();
    if (watched && this.kept?.names === key && this.kept.linkChanges === this.linkChanges) return this.kept.list;
    // Each index read once, then sorted (a sysfs read costs more than the rest of a sort).
    const list = Object.freeze(names.map((name) => ({ name, index: ifindex(name) }))
      .sort((a, b) => a.index - b.index)
      .map(({ name }) => Object.freeze({ name, type: hostInterfaceType(name) })));
    this.kept = watched ? { names: key, linkChanges: this.linkChanges, list } : undefined;
    return list;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.restartTimer);
    this.monitor?.kill();
    this.monitor = undefined;
    this.kept = undefined;
  }

  private startMonitor(): void {
    const now = Date.now();
    this.starts = this.starts.filter((t) => now - t < 60_000);
    if (this.starts.length >= MONITOR_RESTARTS_PER_MINUTE) {
      this.log.warn('the host link monitor (ip monitor link) exited too often: host interfaces are read on every listing');
      this.stopped = true;
      return;
    }
    this.starts.push(now);
    let proc: HostProcess;
    try {
      proc = this.tools.spawn('ip', ['-o', 'monitor', 'link'], { endWithDaemon: true });
    } catch (err) {
      this.log.warn({ err }, 'could not start the host link monitor: host interfaces are read on every listing');
      this.stopped = true;
      return;
    }
    this.monitor = proc;
    this.monitorSince = Date.now();
    this.linkChanges++;
    proc.stdout.on('data', () => {
      this.linkChanges++;
    });
    proc.stderr?.resume();
    void proc.exited.then(() => {
      if (this.monitor !== proc) return;
      this.monitor = undefined;
      this.linkChanges++;
      if (this.stopped) return;
      this.restartTimer = setTimeout(() => {
        this.restartTimer = undefined;
        if (!this.stopped) this.startMonitor();
      }, MONITOR_RESTART_DELAY_MS);
      this.restartTimer.unref();
    });
  }
}
