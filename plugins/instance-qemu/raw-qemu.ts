/**
 * `raw.qemu`: extra QEMU arguments appended to the generated command line. They are judged by
 * QEMU itself, not by a list kept here: QEMU reads its options in order and `-h` placed after
 * them exits at once with help, so an unknown option, a missing argument or a value QEMU
 * rejects while parsing fails that run, with QEMU's own message, before anything starts.
 */
import { badRequest, type HostTools } from '../../sdk/index.js';
import { QEMU } from './probe.js';

/** Splits on blanks, keeping single- or double-quoted runs together (as a shell would). */
export function splitArgs(text: string): string[] {
  const out: string[] = [];
  let current: string | undefined;
  let quote: string | undefined;
  for (const ch of text) {
    if (quote) {
      if (ch === quote) quote = undefined;
      else current += ch;
    } else if (ch === '"' || ch === "'") {
      quote = ch;
      current ??= '';
    } else if (/\s/.test(ch)) {
      if (current !== undefined) out.push(current);
      current = undefined;
    } else {
      current = (current ?? '') + ch;
    }
  }
  if (quote) throw new Error('an unterminated quote');
  if (current !== undefined) out.push(current);
  return out;
}

/** Options that would take the VM out of the daemon's control. */
const FORBIDDEN = new Set(['-daemonize', '-pidfile', '-qmp', '-monitor', '-readconfig', '-writeconfig', '-runas', '-chroot']);

export async function checkRawQemu(tools: HostTools, text: string): Promise<string[]> {
  let args: string[];
  try {
    args = splitArgs(text);
  } catch (err) {
    throw badRequest(`Invalid value for "raw.qemu": ${(err as Error).message}`);
  }
  for (const a of args) {
    if (FORBIDDEN.has(a.replace(/^--/, '-'))) throw badRequest(`Invalid value for "raw.qemu": "${a}" is managed by the daemon`);
  }
  if (args.length === 0) return args;
  const r = await tools.run(QEMU, ['-nodefaults', '-no-user-config', ...args, '-h'], { timeoutMs: 10_000, allowFailure: true });
  if (r.exitCode !== 0) {
    // QEMU's first line names the option; what follows explains units and the like.
    const why = r.stderr.split('\n').map((l) => l.replace(/^qemu-system-\w+: /, '').trim()).find(Boolean) ?? `exit ${r.exitCode}`;
    throw badRequest(`Invalid value for "raw.qemu": QEMU refuses it: ${why}`);
  }
  return args;
}
