/**
 * Imported first by the daemon's entries (bin/corrald.ts, the bundle's), for its effect: V8's optimizing
 * compiler is off while the modules load and the daemon boots. That code runs once; what the optimizer made
 * of the loops it found hot there (schemas, route tables) was compiled on the main thread
 * (`--single-threaded`) and left ~3.5 MiB of the compiler's own machine code resident in a fresh daemon
 * (decision 0002). `resumeOptimizer` turns it on again once the daemon serves, for the code requests make hot.
 * In the bundle this runs after the loader has read V8's code cache, and the flag is back before the loader
 * writes one (V8 checks a cache against the flags it was made under): when the daemon serves, or at exit.
 */
import v8 from 'node:v8';

/** Node or V8 flags that choose how V8 optimizes: an operator who names one keeps exactly what they asked for. */
const OPTIMIZER_FLAG = /(^|\s)--(no-)?(opt|turbofan|jitless|lite-mode|max-opt)(=|\s|$)/;

let paused = ![...process.execArgv, process.env.NODE_OPTIONS ?? ''].some((arg) => OPTIMIZER_FLAG.test(arg));
if (paused) {
  v8.setFlagsFromString('--no-opt');
  // Before the bundle loader's own exit listener, which writes the code cache.
  process.prependOnceListener('exit', () => resumeOptimizer());
}

/** Turns the optimizer on again, if this module turned it off (once). */
export function resumeOptimizer(): void {
  if (!paused) return;
  paused = false;
  v8.setFlagsFromString('--opt');
}
