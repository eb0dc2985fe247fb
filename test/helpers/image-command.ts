/** Runs the first-image command the way the README does (`npm run image:<kind> -- …`), timed. */
import { spawn } from 'node:child_process';
import { collectRun } from './clients.js';
import { projectRoot } from './daemon.js';

export interface CommandRun {
  status: number | null;
  stdout: string;
  stderr: string;
  /** Wall-clock milliseconds, npm included. */
  ms: number;
}

/** `npm run --silent image:<kind> -- args`, killed after `timeoutMs`. */
export async function imageCommand(kind: 'busybox' | 'debian' | 'vm', args: string[], timeoutMs = 120_000): Promise<CommandRun> {
  const started = Date.now();
  const child = spawn('npm', ['run', '--silent', `image:${kind}`, '--', ...args], { cwd: projectRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  const run = await collectRun(child, timeoutMs);
  return { ...run, ms: Date.now() - started };
}
