/** What the local subcommands share: their flags (`--dir`, `--timeout`) and calls to the daemon's unix socket. */
import http from 'node:http';
import path from 'node:path';
import { parseArgs } from 'node:util';

export interface LocalFlags {
  dir: string;
  /** Seconds; 0 waits as long as it takes. */
  timeout: number;
}

export class CommandUsageError extends Error {}

/** `--dir <path>` (default $CORRAL_DIR, else /var/lib/corral) and `--timeout <seconds>` (default 0: no limit). */
export function parseLocalFlags(argv: string[], env: NodeJS.ProcessEnv): LocalFlags & { help: boolean } {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        dir: { type: 'string' },
        timeout: { type: 'string', short: 't' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    throw new CommandUsageError((err as Error).message);
  }
  const timeout = values.timeout === undefined ? 0 : Number(values.timeout);
  if (!Number.isFinite(timeout) || timeout < 0) throw new CommandUsageError(`--timeout must be a number of seconds, not "${values.timeout}"`);
  if (values.dir === '') throw new CommandUsageError('--dir needs a value');
  return { dir: path.resolve(values.dir ?? (env.CORRAL_DIR || '/var/lib/corral')), timeout, help: values.help ?? false };
}

export const LOCAL_FLAGS_USAGE = `  --dir <path>         the daemon's data directory (default: $CORRAL_DIR or /var/lib/corral)
  -t, --timeout <s>    give up after this many seconds (default 0: wait as long as it takes)
  -h, --help           print this help`;

export interface SocketAnswer {
  status: number;
  body: string;
}

/** One request on the daemon's unix socket; rejects when nothing answers there. */
export function socketRequest(dir: string, method: string, url: string, timeoutMs = 10_000): Promise<SocketAnswer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: path.join(dir, 'unix.socket'), method, path: url, timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('no answer in time')));
    req.on('error', reject);
    req.end();
  });
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs a subcommand body, turning usage mistakes into exit code 2 with the usage text. */
export async function withUsage(name: string, usage: string, run: () => Promise<number>): Promise<number> {
  try {
    return await run();
  } catch (err) {
    if (!(err instanceof CommandUsageError)) throw err;
    process.stderr.write(`corrald ${name}: ${err.message}\n${usage}\n`);
    return 2;
  }
}
