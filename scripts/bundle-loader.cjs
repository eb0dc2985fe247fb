'use strict';
/**
 * Starts the bundle beside this file (written by scripts/build-bundle.mjs). Node 20 keeps no compiled
 * code between runs of a module, and compiling the bundle's ~2 MiB, then each function it calls while
 * booting, was about a quarter of a cold start. Compiled here as a script instead, it is given V8's code cache
 * from the last start: the cache is written once a start that had none (or whose cache V8 refused: another
 * node, other flags, a rebuilt bundle) has booted, by then holding every function the boot ran, or at exit
 * if that comes first.
 * The boot runs without V8's optimizing compiler: its code runs once, and what the optimizer made of the
 * loops it found hot (schemas, route tables) was compiled on the main thread (`--single-threaded`) and
 * left ~3.5 MiB of the compiler's own machine code resident (decision 0002). The daemon says its boot is
 * over with a `corral:serving` event on `process`; the optimizer is back from then on. An operator who
 * names an optimizer flag to node keeps exactly what they asked for.
 * CORRAL_CODE_CACHE names another file for it (a read-only install keeps it on a writable disk), or
 * `none` for no cache; where it cannot be written the daemon runs the same, only without it.
 * CommonJS, not an ES module: node then starts without its ES module loader, ~10 ms and ~2 MiB less.
 */
const { readFileSync, renameSync, rmSync, statSync, writeFileSync } = require('node:fs');
const { createRequire } = require('node:module');
const { pathToFileURL } = require('node:url');
const path = require('node:path');
const v8 = require('node:v8');
const vm = require('node:vm');

const file = path.join(__dirname, '@BUNDLE@');
const cacheFile = process.env.CORRAL_CODE_CACHE === 'none' ? undefined : process.env.CORRAL_CODE_CACHE || `${file}.v8-cache`;
/** Node or V8 flags that choose how V8 optimizes: when an operator gives one, the loader leaves the optimizer alone. */
const OPTIMIZER_FLAG = /(^|\s)--(no-)?(opt|turbofan|jitless|lite-mode|max-opt)(=|\s|$)/;

/**
 * V8 checks a cache against the source's length only, and would run the old code of a rebuilt bundle of
 * the same length: the cache starts with a line naming the bundle it was made from (size and mtime).
 */
const stat = statSync(file);
const header = Buffer.from(`corral code cache ${stat.size} ${stat.mtimeMs}\n`);

/** The compiled bundle, and whether its cache should be written. In a function, so that neither the read cache nor a second copy of the text outlives it. */
function compile() {
  let cachedData;
  try {
    const kept = cacheFile ? readFileSync(cacheFile) : undefined;
    if (kept && kept.subarray(0, header.length).equals(header)) cachedData = kept.subarray(header.length);
  } catch {
    cachedData = undefined;
  }
  // The build checked that the bundle is ASCII only, so latin1 reads it right, without UTF-8 decoding.
  const script = new vm.Script(`(function (exports, require, module, __filename, __dirname, __corralBundleUrl) {${readFileSync(file, 'latin1')}\n})`, {
    filename: file,
    cachedData,
    // The plugin loader imports plugins outside the bundle by path.
    importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  });
  return { script, writeCache: cacheFile !== undefined && (cachedData === undefined || script.cachedDataRejected === true) };
}

const { script, writeCache } = compile();

// Paused only now: V8 checks a code cache against the flags in force, so it is read, and later written,
// with the command line's flags.
const pauseOptimizer = ![...process.execArgv, process.env.NODE_OPTIONS ?? ''].some((arg) => OPTIMIZER_FLAG.test(arg));
if (pauseOptimizer) v8.setFlagsFromString('--no-opt');
const temporary = `${cacheFile}.${process.pid}`;
let booted = false;
function bootOver() {
  if (booted) return;
  booted = true;
  if (pauseOptimizer) v8.setFlagsFromString('--opt');
  if (writeCache) {
    try {
      writeFileSync(temporary, Buffer.concat([header, script.createCachedData()]));
      renameSync(temporary, cacheFile);
    } catch {
      rmSync(temporary, { force: true });
    }
  }
}
// A subcommand never serves: it runs paused to its exit, which is when its cache is written.
process.once('corral:serving', () => setImmediate(bootOver));
process.once('exit', bootOver);
const bundleModule = { exports: {} };
script.runInThisContext()(bundleModule.exports, createRequire(file), bundleModule, file, path.dirname(file), pathToFileURL(file).href);
