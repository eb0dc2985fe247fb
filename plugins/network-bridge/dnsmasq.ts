/**
 * One dnsmasq per bridge for DHCP and DNS. It runs daemonized with its files in the network's
 * directory, so it outlives a daemon that exits (containers keep their network) and the next
 * daemon adopts it through its pid file; the process is recognised by its config path in
 * /proc/<pid>/cmdline, never by name.
 */
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import type { HostTools } from '../../sdk/index.js';

export interface DnsmasqFiles {
  dir: string;
  conf: string;
  hosts: string;
  leases: string;
  pid: string;
  log: string;
}

export const dnsmasqFiles = (dir: string): DnsmasqFiles => ({
  dir,
  conf: path.join(dir, 'dnsmasq.conf'),
  hosts: path.join(dir, 'dnsmasq.hosts'),
  leases: path.join(dir, 'dnsmasq.leases'),
  pid: path.join(dir, 'dnsmasq.pid'),
  log: path.join(dir, 'dnsmasq.log'),
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Whether a process still runs (a zombie waiting for init to reap it does not: its sockets are closed). */
function alive(pid: number): boolean {
  try {
    return !/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** The pid of the dnsmasq serving these files, when it runs. */
export function dnsmasqPid(files: DnsmasqFiles): number | undefined {
  let pid: number;
  try {
    pid = Number.parseInt(readFileSync(files.pid, 'utf8'), 10);
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || pid <= 1) return undefined;
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    if (!cmdline.includes(`--conf-file=${files.conf}`)) return undefined;
    if (!alive(pid)) return undefined;
  } catch {
    return undefined;
  }
  return pid;
}

export class Dnsmasq {
  constructor(private readonly tools: HostTools) {}

  /**
   * Make dnsmasq run with `config`: kept when it already runs with exactly this config, restarted
   * when the config changed, started when it is not running. Answers whether it (re)started.
   */
  async ensure(files: DnsmasqFiles, config: string): Promise<boolean> {
    const current = existsSync(files.conf) ? readFileSync(files.conf, 'utf8') : undefined;
    const pid = dnsmasqPid(files);
    if (pid !== undefined && current === config) return false;
    if (pid !== undefined) await this.stop(files);
    writeFileSync(files.conf, config);
    if (!existsSync(files.hosts)) writeFileSync(files.hosts, '');
    if (!existsSync(files.leases)) writeFileSync(files.leases, '');
    const res = await this.tools.run('dnsmasq', [`--conf-file=${files.conf}`], { allowFailure: true, timeoutMs: 15000 });
    if (res.exitCode !== 0) throw new Error(`dnsmasq failed to start: ${(res.stderr || res.stdout).trim().replace(/^dnsmasq:\s*/, '')}`);
    return true;
  }

  /** Stop the dnsmasq of these files, if it runs (TERM, then KILL after a second). */
  async stop(files: DnsmasqFiles): Promise<void> {
    const pid = dnsmasqPid(files);
    if (pid === undefined) return;
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      return;
    }
    const deadline = Date.now() + 1000;
    // Wait for the process itself: dnsmasq drops its pid file before it has let go of its sockets.
    while (alive(pid)) {
      if (Date.now() > deadline) {
        try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
        break;
      }
      await sleep(5);
    }
  }

  /** Re-read the reservations (hosts file). */
  reload(files: DnsmasqFiles): void {
    const pid = dnsmasqPid(files);
    if (pid !== undefined) process.kill(pid, 'SIGHUP');
  }
}
