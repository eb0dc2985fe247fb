/** Which extension names a plugin claims, and those no test title of the plugin and e2e tests names. */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { projectRoot } from './daemon.js';

export function claimsNamed(plugin: string): { claims: string[]; unnamed: string[] } {
  const registry = JSON.parse(readFileSync(path.join(projectRoot, 'plugin-registry.json'), 'utf8'));
  const claims: string[] = registry.plugins.find((p: { id: string }) => p.id === plugin).provides.extensions;
  const sources = ['test/plugins', 'test/e2e'].flatMap((dir) => readdirSync(path.join(projectRoot, dir))
    .filter((f) => f.endsWith('.ts')).map((f) => readFileSync(path.join(projectRoot, dir, f), 'utf8')));
  // A name counts when it stands in a test title: test('... (name) ...'), test.serial(...), serial(...)
  // (serialUnless), or a file's own wrapper named *Test (vmTest: test.serial, or its skip).
  const titles = sources.flatMap((src) => [...src.matchAll(/(?:\btest(?:\.serial)?|\bserial|\b\w+Test)\((['`"])(.*?)\1,/g)].map((m) => m[2]!));
  return { claims, unnamed: claims.filter((name) => !titles.some((title) => new RegExp(`\\b${name}\\b`).test(title))) };
}
