/** `corrald --help` (the daemon's flags, `--init`, and every subcommand's summary) and `corrald --version`. */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { USAGE } from '../kernel/args.js';
import { projectRoot } from '../kernel/daemon.js';
import { SDK_VERSION } from '../sdk/index.js';
import { SUBCOMMANDS } from './commands/index.js';

export async function helpText(initUsage: string): Promise<string> {
  const names = Object.keys(SUBCOMMANDS).sort();
  const width = Math.max(...names.map((n) => n.length)) + 2;
  const lines = await Promise.all(names.map(async (name) => `  ${name.padEnd(width)}${(await SUBCOMMANDS[name]!()).summary}`));
  return `${USAGE}\n${initUsage}\nCommands:\n${lines.join('\n')}`;
}

export function versionText(): string {
  const { version } = JSON.parse(readFileSync(path.join(projectRoot, 'package.json'), 'utf8')) as { version: string };
  return `corrald ${version} (sdk ${SDK_VERSION})`;
}
