#!/usr/bin/env node
/** corrald: the daemon entry point. */
import { parseArgs, USAGE, UsageError } from '../kernel/args.js';
import { runDaemon } from '../kernel/daemon.js';
import { PluginSetError } from '../kernel/loader/plugin-set.js';
import { DataDirLockedError } from '../kernel/lock.js';

try {
  const args = parseArgs(process.argv.slice(2), process.env);
  if (args.help) {
    console.log(USAGE);
    process.exit(0);
  }
  await runDaemon(args);
} catch (err) {
  if (err instanceof UsageError) console.error(`corrald: ${err.message}\n${USAGE}`);
  else if (err instanceof PluginSetError || err instanceof DataDirLockedError) console.error(`corrald: ${err.message}`);
  else console.error(`corrald: failed to start: ${(err as Error).stack ?? String(err)}`);
  process.exit(2);
}
