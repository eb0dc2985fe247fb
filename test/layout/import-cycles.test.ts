/**
 * No import cycles among the plugins: a family reaches its neighbours through hook sets,
 * extension points and services, so no file needs a file that needs it back.
 */
import test from 'ava';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { projectRoot } from '../helpers/daemon.js';
import { importCycles, importGraph } from '../helpers/import-graph.js';

const show = (cycles: string[][]) => cycles.map((c) => c.map((f) => path.relative(projectRoot, f)).join(' <-> ')).join('\n');

test('no import cycle under plugins/ (type-only imports count)', (t) => {
  const graph = importGraph([path.join(projectRoot, 'plugins')]);
  t.true(graph.size > 100, 'the sources were found');
  const cycles = importCycles(graph);
  t.deepEqual(cycles, [], `import cycles:\n${show(cycles)}`);
});

test('the check finds a cycle that runs partly through type-only imports, over several lines', (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-cycles-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const write = (name: string, text: string) => writeFileSync(path.join(dir, name), text);
  write('a.ts', "import { b } from './b.js';\nexport const a = () => b;\n");
  write('b.ts', "import type { C } from './c.js';\nexport const b = 1;\nexport type B = C;\n");
  write('c.ts', "import {\n  a,\n} from './a.js';\nexport type C = typeof a;\n");
  write('d.ts', "export const d = () => import('./a.js');\n");
  const cycles = importCycles(importGraph([dir]));
  t.deepEqual(cycles.map((c) => c.map((f) => path.basename(f))), [['a.ts', 'b.ts', 'c.ts']]);
});
