import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import bunyan from 'bunyan';
import { createHostTools } from '../../kernel/host-tools/host-tools.js';
import { HostToolError } from '../../sdk/index.js';

const records: { msg: string; command?: string; exitCode?: number }[] = [];
const log = bunyan.createLogger({ name: 'test', streams: [{ level: 'debug', type: 'raw', stream: { write: (r: object) => records.push(r as never) } as never }] });
const tools = createHostTools(log);

test('runs a command, returns its output and logs it', async (t) => {
  const r = await tools.run('sh', ['-c', 'echo out; echo err >&2'], {});
  t.is(r.stdout, 'out');
  t.is(r.stderr, 'err');
  t.is(r.exitCode, 0);
  t.true(records.some((rec) => rec.command === 'sh' && rec.exitCode === 0));
});

test('a failing command becomes a HostToolError naming the command and its stderr', async (t) => {
  const err = await t.throwsAsync(tools.run('sh', ['-c', 'echo broken pipe >&2; exit 3'])) as HostToolError;
  t.true(err instanceof HostToolError);
  t.is(err.exitCode, 3);
  t.regex(err.message, /sh failed \(exit 3\): broken pipe/);
  const allowed = await tools.run('sh', ['-c', 'exit 4'], { allowFailure: true });
  t.is(allowed.exitCode, 4);
});

test('input reaches stdin, env adds to the daemon environment, one final newline is stripped', async (t) => {
  const r = await tools.run('sh', ['-c', 'cat; echo "$X1_HOST_TOOL:$PATH_SEEN"; printf "\\n\\n"'], { input: 'in\n', env: { X1_HOST_TOOL: 'set', PATH_SEEN: process.env.PATH ? 'yes' : 'no' } });
  t.is(r.stdout, 'in\nset:yes\n\n');
  // Without input the command reads end of file rather than waiting.
  t.is((await tools.run('cat', [], { timeoutMs: 5000 })).stdout, '');
});

test('a command killed by a signal fails even when failure is allowed', async (t) => {
  const err = await t.throwsAsync(tools.run('sh', ['-c', 'kill -9 $$'], { allowFailure: true })) as HostToolError;
  t.regex(err.message, /sh failed: killed by SIGKILL/);
  t.is(err.exitCode, undefined);
});

test('a command past its timeout is killed and reported', async (t) => {
  const started = Date.now();
  const err = await t.throwsAsync(tools.run('sleep', ['10'], { timeoutMs: 200 })) as HostToolError;
  t.regex(err.message, /timed out after 200 ms/);
  t.true(Date.now() - started < 5000);
});

test('a missing binary is reported, and which() finds what is on PATH', async (t) => {
  const err = await t.throwsAsync(tools.run('no-such-binary-here', []));
  t.regex(err!.message, /no-such-binary-here/);
  t.regex((await tools.which('sh')) ?? '', /\/sh$/);
  t.is(await tools.which('no-such-binary-here'), undefined);
});

test('endWithDaemon children die with the daemon, others outlive it', async (t) => {
  const { spawn } = await import('node:child_process');
  const { existsSync } = await import('node:fs');
  const path = await import('node:path');
  const { fileURLToPath } = await import('node:url');
  const fixture = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'orphans', 'run-and-wait.js');
  const child = spawn(process.execPath, [fixture], { stdio: ['ignore', 'pipe', 'inherit'] });
  const pids = await new Promise<{ bound: number; free: number }>((resolve) => child.stdout!.once('data', (c) => resolve(JSON.parse(String(c)))));
  try {
    // setpriv has become sleep once its comm says so.
    const { readFileSync } = await import('node:fs');
    const isSleep = (pid: number) => existsSync(`/proc/${pid}`) && readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'sleep';
    const deadline = Date.now() + 5000;
    while (!isSleep(pids.bound) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    const gone = Date.now() + 5000;
    while (existsSync(`/proc/${pids.bound}`) && Date.now() < gone) await new Promise((r) => setTimeout(r, 20));
    t.false(existsSync(`/proc/${pids.bound}`), 'the bound child was killed with its parent');
    t.true(existsSync(`/proc/${pids.free}`), 'an unbound child lives on');
  } finally {
    try { process.kill(pids.free, 'SIGKILL'); } catch { /* gone */ }
  }
});

test('runRemembered gives a kept answer across restarts while the binary and its dependencies are unchanged', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-remembered-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const tool = path.join(dir, 'probe-tool');
  const library = path.join(dir, 'libprobe.so');
  const runs = path.join(dir, 'runs');
  const answersFile = path.join(dir, 'answers.json');
  writeFileSync(library, 'one');
  writeFileSync(tool, `#!/bin/sh\necho run >> ${runs}\ncat ${library}\n[ "$1" = fail ] && exit 3\nexit 0\n`, { mode: 0o755 });
  const count = () => (existsSync(runs) ? readFileSync(runs, 'utf8').split('\n').filter(Boolean).length : 0);
  // A new HostTools on the same file stands for a restarted daemon.
  const boot = () => createHostTools(log, { answersFile });

  t.is((await boot().runRemembered!(tool, ['--version'], { dependsOn: [library] })).stdout, 'one');
  t.is(count(), 1);
  t.is((await boot().runRemembered!(tool, ['--version'], { dependsOn: [library] })).stdout, 'one');
  t.is(count(), 1, 'the kept answer was given without running the tool');
  // Other arguments are another answer.
  await boot().runRemembered!(tool, ['-v'], { dependsOn: [library] });
  t.is(count(), 2);

  // The library is replaced (a package upgrade writes a new file): the tool runs again.
  writeFileSync(`${library}.new`, 'two');
  renameSync(`${library}.new`, library);
  t.is((await boot().runRemembered!(tool, ['--version'], { dependsOn: [library] })).stdout, 'two');
  t.is(count(), 3);
  // The binary rewritten in place (same size): its change time moved.
  await new Promise((r) => setTimeout(r, 20));
  writeFileSync(tool, readFileSync(tool));
  await boot().runRemembered!(tool, ['--version'], { dependsOn: [library] });
  t.is(count(), 4);
  await boot().runRemembered!(tool, ['--version'], { dependsOn: [library] });
  t.is(count(), 4);

  // A failure is not kept, nor an answer whose dependency is missing.
  t.is((await boot().runRemembered!(tool, ['fail'], { allowFailure: true })).exitCode, 3);
  await boot().runRemembered!(tool, ['fail'], { allowFailure: true });
  t.is(count(), 6);
  await boot().runRemembered!(tool, ['--version'], { dependsOn: [path.join(dir, 'absent')] });
  await boot().runRemembered!(tool, ['--version'], { dependsOn: [path.join(dir, 'absent')] });
  t.is(count(), 8);

  // A damaged answers file is read as none.
  writeFileSync(answersFile, '{"broken');
  t.is((await boot().runRemembered!(tool, ['--version'], { dependsOn: [library] })).stdout, 'two');
  t.is(count(), 9);
  t.truthy(JSON.parse(readFileSync(answersFile, 'utf8')));
});
