/**
 * The layout's lines are the compiler's (docs/decisions/0028): the contract imports nothing of ours
 * but itself, the library only the contract, the kernel only the contract, a plugin only the contract
 * and the library. A deliberate bad import in a scratch copy of the tree fails `tsc -b`; the same copy
 * without it builds.
 */
import test from 'ava';
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { projectRoot } from '../helpers/daemon.js';

const tsc = path.join(projectRoot, 'node_modules', 'typescript', 'bin', 'tsc');

interface TsConfig {
  extends?: string;
  exclude?: string[];
  references?: { path: string }[];
}

const readConfig = (dir: string): TsConfig => JSON.parse(readFileSync(path.join(projectRoot, dir, 'tsconfig.json'), 'utf8'));

/** The folders a project references, relative to the repository root. */
const referencesOf = (dir: string): string[] =>
  (readConfig(dir).references ?? []).map((r) => path.relative(projectRoot, path.resolve(projectRoot, dir, r.path)) || '.').sort();

const pluginFolders = (): string[] => ['plugins', 'examples'].flatMap((top) =>
  readdirSync(path.join(projectRoot, top)).filter((name) => statSync(path.join(projectRoot, top, name)).isDirectory()).map((name) => `${top}/${name}`));

test('every plugin and example folder is a project the build reaches, seeing only the contract and the library', (t) => {
  const built = referencesOf('.');
  const tested = referencesOf('test');
  for (const folder of pluginFolders()) {
    t.true(existsSync(path.join(projectRoot, folder, 'tsconfig.json')), `${folder} has no tsconfig.json (copy another plugin's, and add the folder to the references of tsconfig.json and test/tsconfig.json)`);
    t.deepEqual(referencesOf(folder), ['sdk', 'sdk/lib'], `${folder} may reference only the contract and the library`);
    t.true(built.includes(folder), `the root tsconfig.json does not build ${folder}`);
    t.true(tested.includes(folder), `test/tsconfig.json does not reference ${folder}`);
  }
  t.deepEqual(referencesOf('sdk'), [], 'the contract references no project');
  t.deepEqual(readConfig('sdk').exclude?.slice().sort(), ['lib', 'testing'], 'the library and the test kit are not part of the contract');
  t.deepEqual(referencesOf('sdk/lib'), ['sdk'], 'the library references only the contract');
  t.deepEqual(referencesOf('kernel'), ['sdk'], 'the kernel references only the contract');
});

/**
 * A copy of the tree that matters here: the real tsconfig files, the contract, library, kernel and two
 * plugins, with their built output and timestamps, so that only what a case changes is compiled again.
 */
const scratch = mkdtempSync(path.join(tmpdir(), 'corral-layout-'));
test.after.always(() => rmSync(scratch, { recursive: true, force: true }));

const kit = path.join('sdk', 'testing');
for (const part of ['package.json', 'tsconfig.base.json', 'sdk', 'kernel', 'plugins/profiles', 'plugins/networks']) {
  for (const [from, to] of [[projectRoot, scratch], [path.join(projectRoot, 'dist'), path.join(scratch, 'dist')]] as const) {
    if (!existsSync(path.join(from, part))) continue;
    cpSync(path.join(from, part), path.join(to, part), {
      recursive: true,
      preserveTimestamps: true,
      filter: (src) => !path.relative(from, src).startsWith(kit),
    });
  }
}
symlinkSync(path.join(projectRoot, 'node_modules'), path.join(scratch, 'node_modules'));

interface Build {
  code: number;
  output: string;
}

function build(...projects: string[]): Promise<Build> {
  return new Promise((resolve) => {
    execFile(process.execPath, [tsc, '-b', ...projects.map((p) => path.join(scratch, p))], { cwd: scratch, maxBuffer: 16 << 20 },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, output: stdout + stderr }));
  });
}

test.serial('the scratch copy builds as it is', async (t) => {
  const result = await build('sdk/lib', 'kernel', 'plugins/profiles');
  t.is(result.code, 0, result.output);
});

// Each case imports a small file across a line, so that the build has little else to compile.
const BAD_IMPORTS: { title: string; project: string; file: string; source: string; reaches: string }[] = [
  { title: 'a plugin importing another plugin', project: 'plugins/profiles', file: 'plugins/profiles/bad-import.ts',
    source: "export * from '../networks/names.js';\n", reaches: 'plugins/networks/names.ts' },
  { title: 'a plugin importing the kernel', project: 'plugins/profiles', file: 'plugins/profiles/bad-import.ts',
    source: "export * from '../../kernel/bounded.js';\n", reaches: 'kernel/bounded.ts' },
  { title: 'the contract importing the library', project: 'sdk', file: 'sdk/bad-import.ts',
    source: "export * from './lib/archive/tar-walk.js';\n", reaches: 'sdk/lib/archive/tar-walk.ts' },
  { title: 'the contract importing the kernel', project: 'sdk', file: 'sdk/bad-import.ts',
    source: "export * from '../kernel/bounded.js';\n", reaches: 'kernel/bounded.ts' },
  { title: 'the library importing a plugin', project: 'sdk/lib', file: 'sdk/lib/bad-import.ts',
    source: "export * from '../../plugins/profiles/serial.js';\n", reaches: 'plugins/profiles/serial.ts' },
  { title: 'the library importing the kernel', project: 'sdk/lib', file: 'sdk/lib/bad-import.ts',
    source: "export * from '../../kernel/bounded.js';\n", reaches: 'kernel/bounded.ts' },
  { title: 'the kernel importing the library', project: 'kernel', file: 'kernel/bad-import.ts',
    source: "export * from '../sdk/lib/archive/tar-walk.js';\n", reaches: 'sdk/lib/archive/tar-walk.ts' },
  { title: 'the kernel importing a plugin', project: 'kernel', file: 'kernel/bad-import.ts',
    source: "export * from '../plugins/profiles/serial.js';\n", reaches: 'plugins/profiles/serial.ts' },
];

for (const bad of BAD_IMPORTS) {
  test.serial(`the build fails on ${bad.title}`, async (t) => {
    const file = path.join(scratch, bad.file);
    writeFileSync(file, bad.source);
    try {
      const result = await build(bad.project);
      t.not(result.code, 0, `tsc -b ${bad.project} passed with ${bad.file}`);
      // TS6307: the imported file is outside the project and outside every project it references.
      const refused = result.output.split('\n').find((line) => line.includes('TS6307') && line.includes(path.join(scratch, bad.reaches)));
      t.truthy(refused, result.output);
    } finally {
      unlinkSync(file);
      // tsc -b writes its output even for a project with errors: leave no trace for the next case.
      for (const ext of ['.js', '.js.map', '.d.ts']) rmSync(path.join(scratch, 'dist', bad.file.replace(/\.ts$/, ext)), { force: true });
    }
  });
}

test.serial('the scratch copy builds again once the bad imports are gone', async (t) => {
  const result = await build('sdk/lib', 'kernel', 'plugins/profiles');
  t.is(result.code, 0, result.output);
});
