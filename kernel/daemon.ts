/** Runs the kernel as a daemon: data dir, single-instance lock, unix socket, signals, clean exit. */
import { mkdirSync, rmSync, existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kernel } from './kernel.js';
import { lockDataDir } from './lock.js';
import { resumeOptimizer } from './boot-optimizer.js';
import { collectBootGarbageWhenIdle } from './boot-garbage.js';
import type { DaemonArgs } from './args.js';

/** dist/kernel/daemon.js -> dist/ (compiled tree) and the project root (registry file). */
const compiledRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const projectRoot = path.resolve(compiledRoot, '..');

/** What a bundled daemon carries: the plugin set it was built for, and that set's modules by plugin id. */
export interface BundledPlugins {
  set: string;
  modules: Readonly<Record<string, unknown>>;
}

/** Beyond the sum of the shutdown steps' bounds, before the daemon gives up on a clean stop. */
const BACKSTOP_MARGIN_MS = 5_000;

/**
 * `afterStart` runs once the daemon serves (the bin's `--init`); when it answers an exit code the
 * daemon stops cleanly and exits with it, so a supervisor sees the failure.
 */
export async function runDaemon(args: DaemonArgs, afterStart?: (kernel: Kernel) => Promise<number | undefined>, bundled?: BundledPlugins): Promise<Kernel> {
  const dir = path.resolve(args.dir);
  mkdirSync(dir, { recursive: true, mode: 0o711 });
  const unlock = lockDataDir(dir);
  const socketPath = path.join(dir, 'unix.socket');
  // The lock proves no daemon owns this dir, so a socket file left here is stale.
  if (existsSync(socketPath)) rmSync(socketPath);

  let kernel: Kernel;
  // `corrald shutdown` asks over the socket for what a host shutdown (SIGPWR) does; bound once the kernel is up.
  let shutdownRequested = () => {};
  try {
    kernel = await Kernel.start({
      dataDir: dir,
      storeFile: path.join(dir, 'corral.db'),
      registryFile: args.registry ? path.resolve(args.registry) : path.join(projectRoot, 'plugin-registry.json'),
      plugins: args.plugins,
      compiledRoot,
      socketPath,
      logToStdout: true,
      logToFile: true,
      logLevel: args.logLevel,
      onShutdownRequest: () => shutdownRequested(),
      pluginModules: bundled?.modules,
    });
  } catch (err) {
    unlock();
    throw err;
  } finally {
    resumeOptimizer();
  }

  let exiting = false;
  const exit = (code: number) => {
    rmSync(socketPath, { force: true });
    unlock();
    process.exit(code);
  };
  const shutdown = (signal: string, exitCode = 0) => {
    if (exiting) {
      // A second signal: the operator does not want to wait for a clean stop.
      kernel.log.warn({ signal }, 'second signal during shutdown: exiting now');
      exit(1);
    }
    exiting = true;
    kernel.log.info({ signal }, 'shutting down');
    const info = { hostShutdown: signal === 'SIGPWR' || signal === 'shutdown request' };
    // Every step of stop() is bounded; this is the last resort should one bound fail to hold.
    setTimeout(() => {
      kernel.log.error('shutdown did not finish in time: exiting anyway');
      exit(1);
    }, kernel.shutdownBoundMs(info) + BACKSTOP_MARGIN_MS).unref();
    kernel.stop(info).then(
      () => exit(exitCode),
      (err: Error) => {
        kernel.log.error({ err }, 'unclean shutdown');
        exit(1);
      },
    );
  };
  // Whatever started the daemon may wait for the end of its boot (the bundle's loader writes its code cache then).
  process.emit('corral:serving' as never);
  collectBootGarbageWhenIdle(({ ms, heapBeforeMiB, heapAfterMiB }) =>
    kernel.log.debug({ ms: Math.round(ms), heap_before_mib: +heapBeforeMiB.toFixed(1), heap_after_mib: +heapAfterMiB.toFixed(1) }, "collected the boot's garbage"));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGPWR', () => shutdown('SIGPWR'));
  void afterStart?.(kernel).then((code) => {
    if (code !== undefined && !exiting) shutdown('after-start step failed', code);
  });
  // A request repeated while the daemon stops only waits with the first (a repeated signal means "now").
  shutdownRequested = () => { if (!exiting) shutdown('shutdown request'); };
  // logrotate moved the file away: write to a new one.
  process.on('SIGHUP', () => kernel.reopenLog());
  return kernel;
}
