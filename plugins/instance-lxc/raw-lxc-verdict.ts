/**
 * liblxc's own verdict on `raw.lxc`, asked when the key is set rather than at the next start:
 * lxc-info loads the lines as a config file (`--rcfile`), parsing each one as a start would,
 * and starts nothing. Which keys and values liblxc takes is liblxc's business, so no list of
 * keys is kept here.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { HostTools } from '../../sdk/index.js';
import { rawLxcConfig } from './raw-lxc.js';

const CHECK_TIMEOUT_MS = 10_000;

/**
 * Verdicts by text: every edit of an instance, and a profile edit for each instance using it,
 * re-validates the same raw.lxc, and liblxc's answer for the same lines does not change.
 */
const verdicts = new Map<string, string | undefined>();
const MAX_VERDICTS = 128;

/** The reason liblxc refuses the lines, naming the line; undefined when it takes them. */
export async function liblxcRefusal(hostTools: HostTools, rawLxc: string): Promise<string | undefined> {
  const lines = rawLxcConfig(rawLxc);
  if (!lines.length) return undefined;
  const text = lines.join('\n');
  if (verdicts.has(text)) return verdicts.get(text);
  const verdict = await askLiblxc(hostTools, lines);
  if (verdicts.size >= MAX_VERDICTS) verdicts.delete(verdicts.keys().next().value!);
  verdicts.set(text, verdict);
  return verdict;
}

async function askLiblxc(hostTools: HostTools, lines: string[]): Promise<string | undefined> {
  const dir = await mkdtemp(path.join(tmpdir(), 'corral-raw-lxc-'));
  try {
    const file = path.join(dir, 'raw.lxc');
    await writeFile(file, `${lines.join('\n')}\n`);
    // A container name no config exists for: liblxc starts from an empty config, then loads the file.
    const result = await hostTools.run('lxc-info', ['-n', 'check', '-P', dir, '--rcfile', file, '-c', 'lxc.uts.name', '-l', 'ERROR', '-o', '/dev/null'], {
      timeoutMs: CHECK_TIMEOUT_MS, allowFailure: true,
    });
    if (result.exitCode === 0) return undefined;
    return describe(result.stderr, file);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * liblxc prints `lxc-info: check: <source>: <function>: <line> <message>`; the last message names
 * the config line it could not parse, those before it say why.
 */
function describe(stderr: string, file: string): string {
  const messages = stderr.split('\n')
    .map((l) => /^lxc-info: check: \S+: \w+: \d+ (.*)$/.exec(l.trim())?.[1])
    .filter((m): m is string => Boolean(m));
  const at = messages.map((m) => /^Failed to parse config file ".*" at line "(.*)"$/.exec(m)?.[1]).find((l) => l !== undefined);
  const why = messages.filter((m) => !m.startsWith('Failed to parse config file')).map((m) => m.replaceAll(file, 'raw.lxc'));
  if (at !== undefined) return `liblxc cannot parse the line "${at}"${why.length ? `: ${why.join('; ')}` : ''}`;
  return `liblxc cannot load it: ${why.join('; ') || stderr.trim() || 'lxc-info failed'}`;
}
