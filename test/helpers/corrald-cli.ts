/** Runs `corrald <args>` (the built entry point) as a separate process and collects what it says. */
import { spawn } from 'node:child_process';
import { corrald } from './daemon.js';

export interface CliRun {
  status: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

export function corraldCli(args: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<CliRun> {
  return new Promise((resolve) => {
    const started = Date.now();
    const child = spawn(process.execPath, [corrald, ...args], { env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 120_000);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr, ms: Date.now() - started });
    });
  });
}
