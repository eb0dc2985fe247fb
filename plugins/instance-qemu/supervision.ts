/**
 * What runs, read from the run directories rather than from memory, so that a restarted daemon
 * sees the VMs it started before: QEMU daemonizes (it is nobody's child) and writes its pid file;
 * a pid counts only while /proc shows that process running with this VM's config file. Each
 * running VM has one QMP connection, opened on demand and kept: its events keep the cached run
 * state (running or paused) current, and it is reopened when it drops.
 */
import { readFileSync } from 'node:fs';
import { QmpClient, type QmpEvent } from './qmp.js';
import type { RunDir } from './run-dir.js';

export type RunState = 'running' | 'paused';

export interface Supervised {
  run: RunDir;
  pid: number;
  qmp?: QmpClient;
  connecting?: Promise<QmpClient>;
  state?: RunState;
  /** Resolved when the QEMU process is seen gone (SHUTDOWN or the QMP link closing). */
  events: ((e: QmpEvent) => void)[];
}

const QMP_CONNECT_MS = 5_000;

/** The pid in `run.pidFile`, when that process is QEMU running `run`'s config. */
export function livePid(run: RunDir): number | undefined {
  let pid: number;
  try {
    pid = Number(readFileSync(run.pidFile, 'utf8').trim());
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || pid <= 1) return undefined;
  return isQemuOf(pid, run) ? pid : undefined;
}

export function isQemuOf(pid: number, run: RunDir): boolean {
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    if (!cmdline.split('\0').includes(run.configFile)) return false;
    // A zombie is gone for our purposes.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) Z/.test(stat);
  } catch {
    return false;
  }
}

export class VmTable {
  private readonly vms = new Map<string, Supervised>();
  /** Moves with every change of what the table tells (revision()). */
  private changes = 0;

  /** `onEvent` hears every QMP event of every VM (SHUTDOWN, POWERDOWN, STOP, RESUME...). */
  constructor(private readonly onEvent: (run: RunDir, e: QmpEvent) => void = () => {}) {}

  /** The running VM of `run`, if any (cheap: a pid file and /proc reads). */
  find(run: RunDir): Supervised | undefined {
    const pid = livePid(run);
    const known = this.vms.get(run.dir);
    if (pid === undefined) {
      if (known) this.drop(run);
      return undefined;
    }
    if (known && known.pid === pid) return known;
    if (known) this.drop(run);
    const fresh: Supervised = { run, pid, events: [] };
    this.vms.set(run.dir, fresh);
    this.changes++;
    return fresh;
  }

  /**
   * A number that moves whenever a status the table tells may have changed: a VM found running, one
   * gone, paused or resumed. Each call checks every running VM's process (what telling its status
   * costs); a stopped VM changes only by the driver's own start, which finds it.
   */
  revision(): number {
    for (const vm of [...this.vms.values()]) if (livePid(vm.run) !== vm.pid) this.drop(vm.run);
    return this.changes;
  }

  /** The VM's run state, as QMP told it. */
  setState(vm: Supervised, state: RunState): void {
    if (vm.state === state) return;
    vm.state = state;
    this.changes++;
  }

  /** The VM's QMP connection, opened (and its run state read) when there is none. */
  async qmp(run: RunDir): Promise<QmpClient> {
    const vm = this.find(run);
    if (!vm) throw new Error('the VM is not running');
    if (vm.qmp && !vm.qmp.isClosed) return vm.qmp;
    vm.connecting ??= (async () => {
      try {
        const client = await QmpClient.connect(run.qmpSocket, QMP_CONNECT_MS);
        client.on('event', (e: QmpEvent) => {
          this.onEvent(run, e);
          if (e.event === 'STOP') this.setState(vm, 'paused');
          else if (e.event === 'RESUME') this.setState(vm, 'running');
          for (const listener of [...vm.events]) listener(e);
        });
        client.on('closed', () => {
          if (vm.qmp === client) vm.qmp = undefined;
        });
        const status = await client.execute<{ running: boolean; status: string }>('query-status');
        this.setState(vm, status.running ? 'running' : 'paused');
        vm.qmp = client;
        return client;
      } finally {
        vm.connecting = undefined;
      }
    })();
    return vm.connecting;
  }

  /** Forget a VM (it stopped): its QMP link is closed. */
  drop(run: RunDir): void {
    const vm = this.vms.get(run.dir);
    if (!vm) return;
    this.vms.delete(run.dir);
    this.changes++;
    vm.qmp?.close();
  }
}
