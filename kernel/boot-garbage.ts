/**
 * One full collection once the daemon serves, compacting, and dropping the bytecode of functions not running.
 * A boot allocates far more than it keeps (modules built, the store's first reads, each plugin's boot), and V8
 * leaves that garbage, and the half-empty pages it was spread over, resident until a full collection comes:
 * its memory reducer runs one ~8 s after the last, and whether the boot's own last one came before or after
 * most of the garbage is chance (a change that loaded one module fewer at start left a fresh edge daemon
 * 2 MiB larger). Most of the bytecode is the boot's too, run once. Measured on the edge bundle, 1.5 s after
 * serving: 63.9 MiB without, 61.4 with an ordinary collection, 59.7 compacting, 58.5 dropping bytecode as
 * well (59.4 against 60.4 after the first requests, which took as long). The collection stops the loop for
 * 20–50 ms, so it waits for the loop to be idle: run as the daemon served, it delayed the answer its first
 * client was waiting for (decision 0002).
 */
import { performance } from 'node:perf_hooks';
import v8 from 'node:v8';
import vm from 'node:vm';
import { operatorNamedFlag } from './operator-node-flags.js';

/** How often the loop's load is read, and below which share of a window it counts as idle. */
const IDLE_WINDOW_MS = 250;
const IDLE_SHARE = 0.1;
/** A daemon busy from its start collects as it goes; V8's memory reducer would have come by now anyway. */
const GIVE_UP_MS = 30_000;

/** Sets a V8 flag for the length of `run`, and back after, unless the operator named it. */
function withFlag(name: string, run: () => void): void {
  if (operatorNamedFlag([name])) return run();
  v8.setFlagsFromString(`--${name}`);
  try {
    run();
  } finally {
    v8.setFlagsFromString(`--no-${name}`);
  }
}

function collectBootGarbage(): void {
  // Node 20 has no call for a collection but the gc() that --expose-gc puts in each context made while it is
  // set: one context is made for it, and dropped.
  let gc: (() => void) | undefined;
  withFlag('expose-gc', () => {
    gc = vm.runInNewContext('gc') as () => void;
  });
  // Compacting, and dropping the bytecode of every function not running: most of it is the boot's own (modules'
  // bodies, schemas built once), which V8 would keep for five more full collections; what requests need is
  // compiled again from the source on its next call.
  withFlag('compact-on-every-full-gc', () => withFlag('stress-flush-code', () => gc?.()));
}

/** What the collection did: how long it stopped the loop, and V8's heap in use before and after (MiB). */
export interface BootCollection {
  ms: number;
  heapBeforeMiB: number;
  heapAfterMiB: number;
}

/** Collects the boot's garbage at the first window of IDLE_WINDOW_MS in which the loop was mostly idle. */
export function collectBootGarbageWhenIdle(done: (result: BootCollection) => void): void {
  const since = Date.now();
  let previous = performance.eventLoopUtilization();
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const busy = performance.eventLoopUtilization(now, previous).utilization;
    previous = now;
    if (busy < IDLE_SHARE) {
      clearInterval(timer);
      const heapBefore = v8.getHeapStatistics().used_heap_size;
      const started = performance.now();
      collectBootGarbage();
      done({ ms: performance.now() - started, heapBeforeMiB: heapBefore / 2 ** 20, heapAfterMiB: v8.getHeapStatistics().used_heap_size / 2 ** 20 });
    } else if (Date.now() - since > GIVE_UP_MS) {
      clearInterval(timer);
    }
  }, IDLE_WINDOW_MS).unref();
}
