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
