/**
 * A halt signal that reaches an init before it catches or blocks that signal is dropped (pid 1
 * ignores signals left at their default), and liblxc sends it only once: a clean stop right after
 * a start could then sit out its whole timeout. While a stop waits on a young init, send the
 * signal again a few times; an init already halting ignores the repeats.
 */
import { readFileSync } from 'node:fs';
import { constants } from 'node:os';

/** An init older than this has had time to set up; its stop is liblxc's single signal alone. */
const YOUNG_INIT_MS = 5_000;
/** When the repeats go out, in milliseconds after the stop began. */
const REPEAT_AT_MS = [300, 1_000, 2_500];
/** glibc's SIGRTMIN (the kernel's 32 less the two that threads keep). */
const SIGRTMIN = 34;

/** The halt signal of a rendered liblxc config (its last `lxc.signal.halt`), liblxc's SIGPWR without one. */
export function configuredHaltSignal(config: string): number | undefined {
  const values = [...config.matchAll(/^\s*lxc\.signal\.halt\s*=\s*(\S+)\s*$/gm)].map((m) => m[1]!);
  const value = (values.at(-1) ?? 'SIGPWR').toUpperCase();
  if (/^\d+$/.test(value)) return Number(value);
  const name = value.startsWith('SIG') ? value : `SIG${value}`;
  const rt = /^SIGRTMIN(?:\+(\d+))?$/.exec(name);
  if (rt) return SIGRTMIN + Number(rt[1] ?? 0);
  return (constants.signals as Record<string, number>)[name];
}

/** The process's start time in clock ticks since boot; undefined when it is gone. */
function startTicks(pid: number): number | undefined {
  try {
    return Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[19]);
  } catch {
    return undefined;
  }
}

function uptimeTicks(): number {
  return Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]) * 100; // USER_HZ is 100 on Linux
}

/**
 * Repeats the halt signal to a young init until `done` settles; nothing for an older one. The
 * signal is looked up only for a young init (it means reading the container's config).
 */
export function repeatHaltWhileYoung(pid: number, haltSignal: () => number | undefined, done: Promise<unknown>): void {
  const started = startTicks(pid);
  if (started === undefined || (uptimeTicks() - started) * 10 > YOUNG_INIT_MS) return;
  const signal = haltSignal();
  if (signal === undefined) return;
  const timers = REPEAT_AT_MS.map((ms) => setTimeout(() => {
    // The same process still (a pid is not reused within seconds, but check anyway).
    if (startTicks(pid) !== started) return;
    try {
      process.kill(pid, signal);
    } catch { /* gone */ }
  }, ms));
  const clear = () => timers.forEach(clearTimeout);
  done.then(clear, clear);
}
