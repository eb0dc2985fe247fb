/**
 * `corrald init`: configures a running daemon over its unix socket, like the reference's `lxd init`
 * (non-interactive forms only): `--auto`, `--preseed [file|-]` (stdin by default), `--dump`.
 * Shares the apply, auto and dump code with the daemon's `--init` flag.
 */
import path from 'node:path';
import { InitError, socketApi } from '../init/api.js';
import { applyPreseed } from '../init/apply.js';
import { autoPreseed, networkChoice } from '../init/auto.js';
import { dumpPreseed, preseedYaml } from '../init/dump.js';
import { readPreseed } from '../init/preseed.js';
import type { Subcommand } from './index.js';

const USAGE = `Usage: corrald init [--dir <path>] (--auto | --preseed [<file>|-] | --dump)
  --dir       data directory of the running daemon (default: $CORRAL_DIR or /var/lib/corral)
  --auto      when missing: a dir pool named default with a root disk in the default profile, and a
              bridge corralbr0 with an eth0 NIC in the default profile (CORRAL_INIT_NETWORK=none
              skips the bridge, CORRAL_INIT_NETWORK=<name> names it)
  --preseed   apply a preseed YAML from a file, or from stdin (no file or -); on failure what was
              applied is undone
  --dump      print the current server (config, networks, storage pools, profiles, projects) as a preseed`;

type Mode = 'auto' | 'preseed' | 'dump';

function parse(argv: string[], env: NodeJS.ProcessEnv): { dir: string; mode: Mode; file: string } | 'help' {
  let dir = env.CORRAL_DIR || '/var/lib/corral';
  let mode: Mode | undefined;
  let file = '-';
  const setMode = (m: Mode) => {
    if (mode && mode !== m) throw new Error(`--${mode} and --${m} cannot be used together`);
    mode = m;
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--dir') {
      const v = argv[++i];
      if (!v) throw new Error('--dir needs a value');
      dir = v;
    } else if (arg.startsWith('--dir=')) dir = arg.slice('--dir='.length);
    else if (arg === '--auto') setMode('auto');
    else if (arg === '--dump') setMode('dump');
    else if (arg === '--preseed') {
      setMode('preseed');
      // The file is optional: the next word is it unless it is another flag.
      if (argv[i + 1] !== undefined && (argv[i + 1] === '-' || !argv[i + 1]!.startsWith('--'))) file = argv[++i]!;
    } else if (arg.startsWith('--preseed=')) {
      setMode('preseed');
      file = arg.slice('--preseed='.length) || '-';
    } else if (arg === '-h' || arg === '--help') return 'help';
    else throw new Error(`unknown argument "${arg}"`);
  }
  if (!mode) throw new Error('say what to do: --auto, --preseed or --dump (interactive init is not available)');
  return { dir, mode, file };
}

const init: Subcommand = {
  summary: 'configure a running daemon: --auto, --preseed [file|-], or --dump its configuration as a preseed',
  async run(argv) {
    let opts: ReturnType<typeof parse>;
    try {
      opts = parse(argv, process.env);
    } catch (err) {
      console.error(`corrald init: ${(err as Error).message}\n${USAGE}`);
      return 2;
    }
    if (opts === 'help') {
      console.log(USAGE);
      return 0;
    }
    const api = socketApi(path.join(opts.dir, 'unix.socket'));
    try {
      if (opts.mode === 'dump') process.stdout.write(preseedYaml(await dumpPreseed(api)));
      else if (opts.mode === 'auto') await applyPreseed(api, await autoPreseed(api, networkChoice(process.env)));
      else await applyPreseed(api, await readPreseed(opts.file));
      return 0;
    } catch (err) {
      if (!(err instanceof InitError)) throw err;
      console.error(`corrald init: ${err.message}`);
      return 1;
    }
  },
};

export default init;
