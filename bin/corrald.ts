#!/usr/bin/env node
/**
 * corrald: `corrald <subcommand> ...` runs a subcommand (bin/commands), anything else runs the daemon.
 * Subcommands talk to a running daemon and need none of the kernel, so the kernel is loaded only for
 * the daemon (waitready and shutdown run in systemd's start and stop paths).
 */
// First: V8's optimizer stays off while the rest loads (kernel/boot-optimizer.ts says until when, and why).
import './boot-without-optimizer.js';
import { resumeOptimizer } from '../kernel/boot-optimizer.js';
import { SUBCOMMANDS } from './commands/index.js';

const subcommand = SUBCOMMANDS[process.argv[2] ?? ''];
if (subcommand) {
  // Not a boot: a subcommand's work (an image built, say) may well be worth optimizing.
  resumeOptimizer();
  process.exit(await (await subcommand()).run(process.argv.slice(3)));
}
await (await import('./run-daemon.js')).runDaemonCommand(process.argv.slice(2));
