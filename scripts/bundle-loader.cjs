'use strict';
/**
 * Starts the bundle beside this file (written by scripts/build-bundle.mjs). Node 20 keeps no compiled
 * code between runs of a module, and compiling the bundle's ~2 MiB, then each function it calls while
 * booting, was about a quarter of a cold start. Compiled here as a script instead, it is given V8's code cache
 * from the last start: the cache is written once a start that had none (or whose cache V8 refused: another
 * node, other flags, a rebuilt bundle) has booted, by then holding every function the boot ran, or at exit
 * if that comes first.
 * The daemon says its boot is over with a `corral:serving` event on `process`.
 * CORRAL_CODE_CACHE names another file for it (a read-only install keeps it on a writable disk), or
 * `none` for no cache; where it cannot be written the daemon runs the same, only without it.
 * CommonJS, not an ES module: node then starts without its ES module loader, ~10 ms and ~2 MiB less.
 */
const { readFileSync, renameSync, rmSync, statSync, writeFileSync } = require('node:fs');
const { createRequire } = require('node:module');
const { pathToFileURL } = require('node:url');
const path = require('node:path');
const vm = require('node:vm');

const file = path.join(__dirname, '@BUNDLE@');
const cacheFile = process.env.CORRAL_CODE_CACHE === 'none' ? undefined : process.env.CORRAL_CODE_CACHE || `${file}.v8-cache`;

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
if (writeCache) {
  const temporary = `${cacheFile}.${process.pid}`;
  let written = false;
  const write = () => {
    if (written) return;
    written = true;
    try {
      writeFileSync(temporary, Buffer.concat([header, script.createCachedData()]));
      renameSync(temporary, cacheFile);
    } catch {
      rmSync(temporary, { force: true });
    }
  };
  // By then the daemon has turned V8's optimizer on again (kernel/boot-optimizer.ts): V8 checks a cache against
  // the flags it was made under. After the requests already waiting. A subcommand never serves: its cache is
  // written at exit.
  process.once('corral:serving', () => setImmediate(write));
  process.once('exit', write);
}
const bundleModule = { exports: {} };
script.runInThisContext()(bundleModule.exports, createRequire(file), bundleModule, file, path.dirname(file), pathToFileURL(file).href);
