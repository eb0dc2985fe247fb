/**
 * End of input through `lxc exec`, alike for containers and VMs: a line piped in comes out of
 * `cat` with and without -T, under -t the terminal echoes it first (end of input is ^D there), and
 * `lines` lines, more than a pipe (or the agent's window) holds, all reach `wc`.
 */
import { lxcWithInput } from './clients.js';

interface Asserts {
  is(actual: unknown, expected: unknown, message?: string): unknown;
  deepEqual(actual: unknown, expected: unknown, message?: string): unknown;
}

export async function assertEndOfInput(t: Asserts, socket: string, instance: string, lines: number): Promise<void> {
  for (const flags of [[], ['-T']]) {
    const run = await lxcWithInput(socket, 'x\n', 'exec', ...flags, instance, '--', 'cat');
    t.is(run.status, 0, run.stderr);
    t.is(run.stdout, 'x\n', flags.join(' '));
  }
  const terminal = await lxcWithInput(socket, 'x\n', 'exec', '-t', instance, '--', 'cat');
  t.is(terminal.status, 0, terminal.stderr);
  t.deepEqual(terminal.stdout.replace(/\r/g, '').split('\n').filter(Boolean), ['x', 'x']);
  const text = Array.from({ length: lines }, (_, i) => `line ${i}`).join('\n') + '\n';
  const counted = await lxcWithInput(socket, text, 'exec', instance, '--', 'wc', '-lc');
  t.is(counted.status, 0, counted.stderr);
  t.deepEqual(counted.stdout.trim().split(/\s+/).map(Number), [lines, Buffer.byteLength(text)]);
}
