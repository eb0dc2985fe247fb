/**
 * The test kit (sdk/testing) is for tests: no module the daemon, the generators, the bench or the
 * plugins run may import it (it imports the kernel, and its conformance suites load ava).
 */
import test from 'ava';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { projectRoot } from '../helpers/daemon.js';

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return full.endsWith(path.join('sdk', 'testing')) ? [] : sources(full);
    return e.name.endsWith('.ts') ? [full] : [];
  });
}

test('nothing outside test/ and the kit itself imports sdk/testing', (t) => {
  const offenders: string[] = [];
  for (const top of ['bin', 'kernel', 'plugins', 'bench', 'examples', 'sdk']) {
    for (const file of sources(path.join(projectRoot, top))) {
      const text = readFileSync(file, 'utf8');
      if (/from\s+['"][^'"]*sdk\/testing[^'"]*['"]|import\(\s*['"][^'"]*sdk\/testing/.test(text)) offenders.push(path.relative(projectRoot, file));
    }
  }
  t.deepEqual(offenders, [], 'the test kit is loaded by non-test code');
});
