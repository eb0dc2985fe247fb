/**
 * Imported first by the daemon's entries (bin/corrald.ts, the bundle's), for its effect: the modules that
 * follow load, and the plugins register, without V8's optimizing compiler (kernel/boot-optimizer.ts says why).
 */
import { pauseOptimizer } from '../kernel/boot-optimizer.js';

pauseOptimizer();
