#!/usr/bin/env node
/** corrald: the daemon entry point. `--init auto|<preseed.yaml>|-` applies a preseed once the daemon is up. */
import { parseArgs, UsageError } from '../kernel/args.js';
import { runDaemon } from '../kernel/daemon.js';
import { PluginSetError } from '../kernel/loader/plugin-set.js';
import { DataDirLockedError } from '../kernel/lock.js';
import { applyPreseed, loadPreseed } from './preseed.js';
import { SUBCOMMANDS } from './commands/index.js';
import { helpText, versionText } from './help.js';

const INIT_USAGE = '  --init       after start, apply a preseed: "auto" (a dir pool named default and a root disk\n               in the default profile, when no pool exists), a YAML file, or - for stdin';

/** Take `--init <value>` out of the arguments the kernel parses. */
function splitInit(argv: string[]): { rest: string[]; init?: string } {
  const rest: string[] = [];
  let init: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--init') init = argv[++i];
    else if (argv[i].startsWith('--init=')) init = argv[i].slice('--init='.length);
    else rest.push(argv[i]);
  }
  if (init === '') throw new UsageError('--init needs a value');
  return { rest, init };
}

const subcommand = SUBCOMMANDS[process.argv[2] ?? ''];
if (subcommand) process.exit(await (await subcommand()).run(process.argv.slice(3)));

try {
  const { rest, init } = splitInit(process.argv.slice(2));
  const args = parseArgs(rest, process.env);
  if (args.help) {
    console.log(await helpText(INIT_USAGE));
    process.exit(0);
  }
  if (args.version) {
    console.log(versionText());
    process.exit(0);
  }
  const preseed = init === undefined ? undefined : await loadPreseed(init);
  const kernel = await runDaemon(args);
  if (preseed) {
    await applyPreseed(async (method, url, body) => {
      const res = await kernel.inject({ method, url, payload: body === undefined ? undefined : JSON.stringify(body), headers: { 'content-type': 'application/json' } });
      let json: any;
      try { json = JSON.parse(res.payload); } catch { /* not JSON */ }
      return { status: res.statusCode, json };
    }, preseed).catch((err: Error) => {
      kernel.log.error({ err }, `init failed: ${err.message}`);
      console.error(`corrald: init failed: ${err.message}`);
    });
  }
} catch (err) {
  if (err instanceof UsageError) console.error(`corrald: ${err.message}\n${await helpText(INIT_USAGE)}`);
  else if (err instanceof PluginSetError || err instanceof DataDirLockedError) console.error(`corrald: ${err.message}`);
  else console.error(`corrald: failed to start: ${(err as Error).stack ?? String(err)}`);
  process.exit(2);
}
