/**
 * The committed docs are what the generator writes: the generator runs into a scratch dir and each
 * file must match docs/ byte for byte, so CI fails when a key or a route changed without a
 * regenerated doc.
 */
import test from 'ava';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { distRoot, projectRoot } from '../helpers/daemon.js';

const GENERATED = ['config-keys.md', 'routes.md', 'openapi.json'];

test('docs/config-keys.md, docs/routes.md and docs/openapi.json are what `npm run docs` writes', async (t) => {
  const out = mkdtempSync(path.join(tmpdir(), 'corral-docs-check-'));
  try {
    await promisify(execFile)(process.execPath, [path.join(distRoot, 'bin', 'gen-docs.js'), '--out', out], { timeout: 90_000 });
    t.deepEqual(readdirSync(out).sort(), [...GENERATED].sort(), 'the generator writes exactly these files');
    for (const file of GENERATED) {
      const committed = path.join(projectRoot, 'docs', file);
      const fresh = readFileSync(path.join(out, file), 'utf8');
      t.true(existsSync(committed), `docs/${file} is missing: run \`npm run docs\` and commit the result`);
      if (!existsSync(committed)) continue;
      const current = readFileSync(committed, 'utf8');
      t.true(current === fresh, `docs/${file} differs from what the generator writes: run \`npm run docs\` and commit the result`
        + `\n${firstDifference(current, fresh)}`);
    }
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

function firstDifference(committed: string, fresh: string): string {
  const a = committed.split('\n');
  const b = fresh.split('\n');
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (a[i] !== b[i]) return `first difference at line ${i + 1}:\n  committed: ${a[i] ?? '(end of file)'}\n  generated: ${b[i] ?? '(end of file)'}`;
  }
  return '';
}
