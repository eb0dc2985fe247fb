/** The daemon itself: `corrald [flags]`, with `--init auto|<preseed.yaml>|-` applied once it is up. */
import { parseArgs, UsageError } from '../kernel/args.js';
import { runDaemon, type BundledPlugins } from '../kernel/daemon.js';
import { PluginSetError } from '../kernel/loader/plugin-set.js';
import { DataDirLockedError } from '../kernel/lock.js';
import { injectApi, InitError } from './init/api.js';
import { INIT_USAGE, initStep } from './init/start-flag.js';
import { helpText, versionText } from './help.js';

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

/** `bundled`: the daemon is a bundle (scripts/build-bundle.mjs); it runs its own set unless `--plugins` names one. */
export async function runDaemonCommand(argv: string[], bundled?: BundledPlugins): Promise<void> {
  try {
    const { rest, init } = splitInit(argv);
    const args = parseArgs(rest, process.env);
    if (bundled && !rest.some((a) => a === '--plugins' || a.startsWith('--plugins='))) args.plugins = bundled.set;
    if (args.help) {
      console.log(await helpText(INIT_USAGE));
      process.exit(0);
    }
    if (args.version) {
      console.log(versionText());
      process.exit(0);
    }
    // Read and checked before the start: a bad preseed changes nothing and the daemon never serves.
    const step = init === undefined ? undefined : await initStep(init, process.env);
    await runDaemon(args, step && (async (kernel) => {
      try {
        await step(injectApi((opts) => kernel.inject(opts)));
        kernel.log.info('init applied');
        return undefined;
      } catch (err) {
        kernel.log.error({ err }, `init failed: ${(err as Error).message}`);
        console.error(`corrald: init failed: ${(err as Error).message}`);
        return 1;
      }
    }), bundled);
  } catch (err) {
    if (err instanceof UsageError) console.error(`corrald: ${err.message}\n${await helpText(INIT_USAGE)}`);
    else if (err instanceof InitError) {
      console.error(`corrald: init: ${err.message}`);
      process.exit(1);
    } else if (err instanceof PluginSetError || err instanceof DataDirLockedError) console.error(`corrald: ${err.message}`);
    else console.error(`corrald: failed to start: ${(err as Error).stack ?? String(err)}`);
    process.exit(2);
  }
}
