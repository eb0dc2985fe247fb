/** Runs `corrald init ...` (a client of a running daemon) and `corrald --init ...` to its exit, as an operator would. */
import { spawn } from 'node:child_process';
import { corrald, nodeFlags } from './daemon.js';
import type { ClientRun } from './clients.js';

function run(args: string[], opts: { input?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number }): Promise<ClientRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeFlags, corrald, ...args], { env: { ...process.env, CORRAL_INIT_NETWORK: 'none', ...opts.env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c));
    child.stderr.on('data', (c: Buffer) => (stderr += c));
    child.stdin.on('error', () => {});
    child.stdin.end(opts.input ?? '');
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`corrald ${args.join(' ')} did not exit: ${stdout}${stderr}`));
    }, opts.timeoutMs ?? 60_000);
    child.on('exit', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

/** `corrald init --dir <dir> ...args` against the daemon running there. */
export const corraldInit = (dir: string, args: string[], opts: { input?: string; env?: NodeJS.ProcessEnv } = {}) =>
  run(['init', '--dir', dir, ...args], opts);

/** The daemon itself with `args`, for runs that are expected to end on their own (a failed `--init`). */
export const corraldUntilExit = (args: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}) => run(args, opts);
