/**
 * V8's optimizing compiler, off while a daemon's modules load and its plugins register
 * (bin/boot-without-optimizer.ts, which the daemon's entries import first). That code runs once; what the
 * optimizer made of the loops it found hot there (schemas built at load, route tables) was compiled on the
 * main thread (`--single-threaded`) and left ~3.5 MiB of the compiler's own machine code resident in a fresh
 * daemon (decision 0002). The boots that follow get BOOT_GRACE_MS more without it, which covers a daemon
 * with few instances: what a boot does grows with the daemon's instances, and a restart adopting a thousand
 * running ones took twice as long without the optimizer.
 * In the bundle the pause comes after the loader has read V8's code cache, and the flag is back before the
 * loader writes one (V8 checks a cache against the flags it was made under): when the daemon serves, or at exit.
 */
import v8 from 'node:v8';
import { operatorNamedFlag } from './operator-node-flags.js';

/** Node or V8 flags that choose how V8 optimizes: an operator who names one keeps exactly what they asked for. */
const OPTIMIZER_FLAGS = ['opt', 'turbofan', 'jitless', 'lite-mode', 'max-opt'];

/** Longer than the plugins of a daemon with few instances take to boot here (~100 ms). */
const BOOT_GRACE_MS = 200;

let paused = false;

/** Turns the optimizer off, unless an operator chose how V8 optimizes. */
export function pauseOptimizer(): void {
  if (paused || operatorNamedFlag(OPTIMIZER_FLAGS)) return;
  paused = true;
  v8.setFlagsFromString('--no-opt');
  // Before the bundle loader's own exit listener, which writes the code cache.
  process.prependOnceListener('exit', resumeOptimizer);
}

/** The modules are loaded and the plugins registered: the optimizer is back once the boots have had their grace. */
export function resumeOptimizerSoon(): void {
  if (paused) setTimeout(resumeOptimizer, BOOT_GRACE_MS).unref();
}

/** Turns the optimizer on again, if it was paused. */
export function resumeOptimizer(): void {
  if (!paused) return;
  paused = false;
  v8.setFlagsFromString('--opt');
}
