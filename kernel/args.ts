/** Command line of the daemon: `--dir <path>`, `--plugins <set or ids>`, `--registry <file>`, the log level, help and version. */

import { LOG_LEVELS } from './logging/logger.js';

export interface DaemonArgs {
  dir: string;
  plugins: string;
  registry?: string;
  logLevel?: (typeof LOG_LEVELS)[number];
  help: boolean;
  version: boolean;
}

export const USAGE = `Usage: corrald [--dir <path>] [--plugins <set|id,id,...>] [--registry <file>] [--log-level <level>]
       corrald <command> [flags]   (see Commands below; corrald <command> --help for its flags)
  --dir        data directory with the unix socket (default: $CORRAL_DIR or /var/lib/corral)
  --plugins    plugin set from plugin-registry.json (edge, full) or a list of plugin ids (default: full)
  --registry   plugin registry file (default: plugin-registry.json of this installation)
  --log-level  debug, info, warn or error (default: info; the server key core.log_level, when set, wins)
  -d, --debug  the same as --log-level debug
  -v, --verbose
               the same as --log-level info
  --version    print the version of corrald and of its plugin contract (SDK), and exit
  -h, --help   print this help and exit`;

export class UsageError extends Error {}

/** The data dir when no --dir is given. */
export const defaultDataDir = (env: NodeJS.ProcessEnv): string => env.CORRAL_DIR || '/var/lib/corral';

export function parseArgs(argv: string[], env: NodeJS.ProcessEnv): DaemonArgs {
  const args: DaemonArgs = { dir: defaultDataDir(env), plugins: 'full', help: false, version: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const [flag, inline] = arg.startsWith('--') && arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined];
    const value = () => {
      const v = inline ?? argv[++i];
      if (v === undefined || v === '') throw new UsageError(`${flag} needs a value`);
      return v;
    };
    switch (flag) {
      case '--dir': args.dir = value(); break;
      case '--plugins': args.plugins = value(); break;
      case '--registry': args.registry = value(); break;
      case '--log-level': {
        const level = value();
        if (!(LOG_LEVELS as readonly string[]).includes(level)) throw new UsageError(`unknown log level "${level}" (${LOG_LEVELS.join(', ')})`);
        args.logLevel = level as DaemonArgs['logLevel'];
        break;
      }
      // The reference's names for its two verbose levels.
      case '-d': case '--debug': args.logLevel = 'debug'; break;
      case '-v': case '--verbose': args.logLevel = 'info'; break;
      case '--version': args.version = true; break;
      case '-h': case '--help': args.help = true; break;
      default: throw new UsageError(`unknown argument "${arg}"`);
    }
  }
  return args;
}
