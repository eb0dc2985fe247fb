/**
 * A recording fake of the host-tools service, for plugin tests that check what a plugin would run
 * on the host without running it: every `run` and `spawn` is recorded, and answered by the first
 * rule the test gave whose command (and argument check) matches, or else by a plain success with
 * no output. Failures behave as the real service's do: a non-zero exit throws a HostToolError
 * unless the caller passed `allowFailure`.
 */
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { HostToolError, type HostProcess, type HostTools, type RunOptions, type RunResult, type SpawnOptions } from '../index.js';

export interface RecordedCall {
  kind: 'run' | 'spawn';
  command: string;
  args: string[];
  /** What was written to the command's standard input (`run` only). */
  input?: string;
  cwd?: string;
}

export interface FakeAnswer {
  stdout?: string;
  stderr?: string;
  /** Default 0. */
  exitCode?: number;
}

export type AnswerFn = (call: RecordedCall) => FakeAnswer | Promise<FakeAnswer>;

interface Rule {
  command: string;
  matches: (args: string[]) => boolean;
  answer: AnswerFn;
}

export interface FakeHostTools extends HostTools {
  /** Every call so far, oldest first. */
  readonly calls: RecordedCall[];
  /**
   * Answer `command` (a name, or the full path a plugin runs) with `answer` when `args` matches: an array is a prefix of the arguments, a
   * function decides; absent, any arguments. Later rules are tried after earlier ones.
   */
  answer(command: string, answer: FakeAnswer | AnswerFn, args?: string[] | ((args: string[]) => boolean)): FakeHostTools;
  /** The calls of one command, as `command arg arg ...` lines. */
  commandLines(command?: string): string[];
  /** Forget the calls recorded so far (the rules stay). */
  clear(): void;
}

export interface FakeHostToolsOptions {
  /** Tools `which` finds (default: every tool). Plugins whose manifest needs a missing one are refused at start. */
  installed?: string[];
}

export function createFakeHostTools(opts: FakeHostToolsOptions = {}): FakeHostTools {
  const calls: RecordedCall[] = [];
  // Plugins may run a tool by its full path (`/usr/sbin/nft`): a rule or filter names it either way.
  const isTool = (actual: string, named: string) => actual === named || path.basename(actual) === named;
  const rules: Rule[] = [];

  const respond = async (call: RecordedCall): Promise<FakeAnswer> => {
    const rule = rules.find((r) => isTool(call.command, r.command) && r.matches(call.args));
    return rule ? rule.answer(call) : {};
  };

  const fake: FakeHostTools = {
    calls,
    answer(command, answer, args) {
      const matches = typeof args === 'function' ? args
        : args ? (actual: string[]) => args.every((a, i) => actual[i] === a) : () => true;
      rules.push({ command, matches, answer: typeof answer === 'function' ? answer : () => answer });
      return fake;
    },
    commandLines(command) {
      return calls.filter((c) => command === undefined || isTool(c.command, command)).map((c) => [c.command, ...c.args].join(' '));
    },
    clear() {
      calls.length = 0;
    },

    async run(command: string, args: string[], runOpts: RunOptions = {}): Promise<RunResult> {
      const call: RecordedCall = { kind: 'run', command, args: [...args], input: runOpts.input?.toString(), cwd: runOpts.cwd };
      calls.push(call);
      const { stdout = '', stderr = '', exitCode = 0 } = await respond(call);
      if (exitCode !== 0 && !runOpts.allowFailure) {
        const detail = (stderr || stdout).trim().split('\n').slice(-3).join(' ');
        throw new HostToolError(command, `${command} failed (exit ${exitCode}): ${detail}`, exitCode);
      }
      return { stdout, stderr, exitCode };
    },

    spawn(command: string, args: string[], spawnOpts: SpawnOptions = {}): HostProcess {
      const call: RecordedCall = { kind: 'spawn', command, args: [...args], cwd: spawnOpts.cwd };
      calls.push(call);
      const stdin = new PassThrough();
      const stdout = new PassThrough();
      const stderr = spawnOpts.pty ? undefined : new PassThrough();
      stdin.resume();
      let killed: number | undefined;
      const exited = respond(call).then(({ stdout: out = '', stderr: err = '', exitCode = 0 }) => {
        stdout.end(out);
        if (stderr) stderr.end(err);
        return killed ?? exitCode;
      });
      return {
        pid: 0,
        stdin,
        stdout,
        stderr,
        resize: () => undefined,
        kill: (signal) => { killed ??= 128 + (typeof signal === 'number' ? signal : 15); },
        exited,
      };
    },

    async which(command: string): Promise<string | undefined> {
      return !opts.installed || opts.installed.includes(command) ? `/usr/bin/${command}` : undefined;
    },
  };
  return fake;
}
