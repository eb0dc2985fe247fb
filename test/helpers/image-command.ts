/** Runs the first-image command the way the README does (`npm run image:<kind> -- …`), timed. */
import { spawn } from 'node:child_process';
import { projectRoot } from './daemon.js';

export interface CommandRun {
  status: number | null;
  stdout: string;
  stderr: string;
  /** Wall-clock milliseconds, npm included. */
  ms: number;
}

/** `npm run --silent image:<kind> -- args`, killed after `timeoutMs`. */
export function imageCommand(kind: 'busybox' | 'debian', args: string[], timeoutMs = 120_000): Promise<CommandRun> {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn('npm', ['run', '--silent', `image:${kind}`, '--', ...args], { cwd: projectRoot, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr, ms: Date.now() - started });
    });
  });
}
