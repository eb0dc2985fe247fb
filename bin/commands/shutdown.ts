/**
 * `corrald shutdown`: asks the running daemon to stop its instances by boot.stop.priority (each
 * within boot.host_shutdown_timeout), as a host shutdown does, and to exit; waits until it has.
 * The systemd unit's ExecStop, so that a host shutdown stops instances in order although systemd
 * itself only sends SIGTERM (which leaves them running for the next daemon).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Subcommand } from './index.js';
import { LOCAL_FLAGS_USAGE, parseLocalFlags, sleep, socketRequest, withUsage } from './local-daemon.js';

const USAGE = `Usage: corrald shutdown [--dir <path>] [--timeout <seconds>]
Stops the running instances in boot.stop.priority order, then the daemon on <dir>, and waits for it to exit.
${LOCAL_FLAGS_USAGE}`;

const POLL_MS = 100;

/** The pid in the daemon's lock file, if there is one. */
function lockOwner(dir: string): number | undefined {
  try {
    return Number(readFileSync(path.join(dir, 'corral.pid'), 'utf8').trim()) || undefined;
  } catch {
    return undefined;
  }
}

/** Running, not merely waiting for its parent to reap it (a zombie has exited already). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

const shutdown: Subcommand = {
  summary: 'stop the instances by boot.stop.priority, then the daemon, and wait for it to exit',
  run: (argv) => withUsage('shutdown', USAGE, async () => {
    const flags = parseLocalFlags(argv, process.env);
    if (flags.help) {
      console.log(USAGE);
      return 0;
    }
    const pid = lockOwner(flags.dir);
    let answer;
    try {
      answer = await socketRequest(flags.dir, 'PUT', '/internal/shutdown');
    } catch (err) {
      process.stderr.write(`corrald shutdown: no daemon answers on ${path.join(flags.dir, 'unix.socket')} (${(err as Error).message})\n`);
      return 1;
    }
    if (answer.status !== 200) {
      process.stderr.write(`corrald shutdown: the daemon refused (${answer.status}): ${answer.body}\n`);
      return 1;
    }
    // Done when the process has exited (its lock file, which it removes just before, is no proof of that).
    const gone = () => (pid === undefined ? lockOwner(flags.dir) === undefined : !running(pid));
    const deadline = flags.timeout > 0 ? Date.now() + flags.timeout * 1000 : Infinity;
    while (!gone()) {
      if (Date.now() >= deadline) {
        process.stderr.write(`corrald shutdown: the daemon on ${flags.dir} is still running after ${flags.timeout} s\n`);
        return 1;
      }
      await sleep(POLL_MS);
    }
    return 0;
  }),
};

export default shutdown;
