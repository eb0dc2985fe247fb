/** The one place child processes are started. */
import { accessSync, constants } from 'node:fs';
import path from 'node:path';
import type Logger from 'bunyan';
import { HostToolError, type HostTools, type RunOptions, type RunResult } from '../../sdk/index.js';
import { launchHostProcess, spawnHostProcess } from './spawn.js';
import { runCommand } from './run-command.js';
import { RememberedAnswers } from './remembered-answers.js';

const DEFAULT_TIMEOUT_MS = 60_000;

/** `answersFile`: where runRemembered keeps its answers (in memory only without one). */
export function createHostTools(log: Logger, options: { answersFile?: string } = {}): HostTools {
  const answers = new RememberedAnswers(options.answersFile);
  const tools: HostTools = {
    async run(command: string, args: string[], opts: RunOptions = {}): Promise<RunResult> {
      const started = Date.now();
      const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
      const result = await runCommand(command, args, { timeoutMs, input: opts.input, cwd: opts.cwd, env: opts.env, endWithDaemon: opts.endWithDaemon });
      const exitCode = result.exitCode ?? -1;
      log.debug({ command, args, exitCode, ms: Date.now() - started }, 'host tool');
      if (result.timedOut) throw new HostToolError(command, `${command} timed out after ${timeoutMs} ms`);
      if (result.exitCode === undefined || (result.exitCode !== 0 && !opts.allowFailure)) {
        const detail = String(result.stderr || result.stdout || result.failure).trim().split('\n').slice(-3).join(' ');
        throw new HostToolError(command, `${command} failed${result.exitCode !== undefined ? ` (exit ${result.exitCode})` : ''}: ${detail}`, result.exitCode);
      }
      return { stdout: result.stdout, stderr: result.stderr, exitCode };
    },
    spawn(command, args, opts = {}) {
      log.debug({ command, args, pty: Boolean(opts.pty) }, 'host process');
      return spawnHostProcess(command, args, opts);
    },
    launch(command, args, opts = {}) {
      log.debug({ command, args, pty: Boolean(opts.pty) }, 'host process');
      return launchHostProcess(command, args, opts);
    },
    which: findOnPath,
    async runRemembered(command, args, opts = {}) {
      const { dependsOn = [], ...runOpts } = opts;
      const binary = command.includes('/') ? command : await findOnPath(command);
      const files = binary === undefined ? undefined : answers.identities([binary, ...dependsOn]);
      const key = [command, ...args].join('\0');
      const kept = files && answers.get(key, files);
      if (kept) {
        log.debug({ command, args }, 'host tool answer remembered');
        return kept;
      }
      const result = await tools.run(command, args, runOpts);
      if (files && result.exitCode === 0) answers.set(key, files, result);
      return result;
    },
  };
  return tools;
}

/**
 * Where `command` is on PATH (then /usr/sbin, /sbin). The checks are synchronous: a few access() calls
 * take microseconds, while each asynchronous one waits for a worker thread, which at start, for every
 * tool of every plugin, added up to a visible part of a cold start.
 */
export async function findOnPath(command: string): Promise<string | undefined> {
  const dirs = (process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin').split(':');
  for (const dir of [...dirs, '/usr/sbin', '/sbin']) {
    const candidate = path.join(dir, command);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch { /* not here */ }
  }
  return undefined;
}
