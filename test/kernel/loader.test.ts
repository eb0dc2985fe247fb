import test from 'ava';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync, existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { resolvePluginSet, PluginSetError, readRegistry, type RegistryFile } from '../../kernel/loader/plugin-set.js';
import { corrald, projectRoot } from '../helpers/daemon.js';

const manifest = (id: string, extra: Record<string, unknown> = {}) => ({ id, entry: `plugins/${id}/index.ts`, version: '1.0.0', sdk: '^2.0.0', ...extra });

const problems = (registry: RegistryFile, selection: string): string[] => {
  try {
    resolvePluginSet(registry, selection, '/');
  } catch (err) {
    if (err instanceof PluginSetError) return err.problems;
    throw err;
  }
  return [];
};

test('dependencies come first; registry order otherwise', (t) => {
  const set = resolvePluginSet({
    plugins: [manifest('c', { requires: { b: '^1.0.0' } }), manifest('a'), manifest('b', { requires: { a: '>=1.0.0' } })],
    sets: { all: ['c', 'a', 'b'] },
  }, 'all', '/');
  t.deepEqual(set.plugins.map((p) => p.id), ['a', 'b', 'c']);
});

test('a selection mixes set names and plugin ids (a set plus a vendor plugin)', (t) => {
  const set = resolvePluginSet({
    plugins: [manifest('a'), manifest('b'), manifest('vendor', { entry: 'examples/vendor/index.ts', requires: { a: '^1.0.0' } })],
    sets: { base: ['a', 'b'] },
  }, 'base,vendor,a', '/');
  t.deepEqual(set.plugins.map((p) => p.id), ['a', 'b', 'vendor']);
  t.deepEqual(problems({ plugins: [manifest('a')], sets: { base: ['a'] } }, 'base,nope'), ['unknown plugin "nope" in "base,nope"']);
});

test('a missing, disabled or out-of-range dependency is refused naming the culprits', (t) => {
  const registry: RegistryFile = {
    plugins: [manifest('a', { requires: { ghost: '^1.0.0' } }), manifest('b', { requires: { c: '^2.0.0' } }), manifest('c'), manifest('d', { requires: { c: '^1.0.0' } })],
  };
  const found = problems(registry, 'a,b,c');
  t.true(found.some((p) => p.includes('a requires "ghost"') && p.includes('not in the registry')), found.join('\n'));
  t.true(found.some((p) => p.includes('b requires c ^2.0.0') && p.includes('1.0.0')));
  t.true(problems(registry, 'd').some((p) => p.includes('d requires "c", which is not enabled')));
});

test('cycles are refused with the cycle spelled out', (t) => {
  const found = problems({ plugins: [manifest('a', { requires: { b: '*' } }), manifest('b', { requires: { c: '*' } }), manifest('c', { requires: { a: '*' } })] }, 'a,b,c');
  t.true(found.some((p) => /dependency cycle: a -> b -> c -> a/.test(p)), found.join('\n'));
});

test('two plugins claiming one extension, driver or namespace, and unknown extension names, are refused', (t) => {
  const found = problems({
    kernel: { provides: { extensions: ['etag'] } },
    plugins: [
      manifest('a', { provides: { extensions: ['warnings', 'etag'], drivers: ['dir'] } }),
      manifest('b', { provides: { extensions: ['warnings', 'no_such_extension'], drivers: ['dir'], dbNamespace: 'a' } }),
    ],
  }, 'a,b');
  t.true(found.some((p) => p.includes('"warnings" is claimed by both a and b')), found.join('\n'));
  t.true(found.some((p) => p.includes('"etag" is claimed by both the kernel and a')));
  t.true(found.some((p) => p.includes('b claims unknown api extension "no_such_extension"')));
  t.true(found.some((p) => p.includes('driver "dir" is provided by both a and b')));
  t.true(found.some((p) => p.includes('db namespace "a" is provided by both a and b')));
});

test('extension points: two plugins registering one name into one point, or registering into a point nobody enabled offers, are refused', (t) => {
  const registry: RegistryFile = {
    plugins: [
      manifest('host', { provides: { extensionPoints: { 'nic-type': ['bridged'] } } }),
      manifest('a', { provides: { registers: { 'nic-type': ['example'] } } }),
      manifest('b', { provides: { registers: { 'nic-type': ['example'], 'storage-driver': ['example'] } } }),
    ],
  };
  const found = problems(registry, 'host,a,b');
  t.true(found.some((p) => p.includes('nic-type "example" is provided by both a and b')), found.join('\n'));
  t.true(found.some((p) => p.includes('b registers into extension point "storage-driver", which no enabled plugin offers')), found.join('\n'));
  // One name in two points is no clash.
  t.deepEqual(problems({ plugins: [...registry.plugins, manifest('c', { provides: { extensionPoints: { 'storage-driver': [] } } })] }, 'host,b,c'), []);
});

test('the catalog knows every manifest\'s names, enabled in the set or not; nothing else', (t) => {
  const set = resolvePluginSet({
    plugins: [
      manifest('host', { provides: { extensionPoints: { 'nic-type': ['bridged', 'sriov'] } } }),
      manifest('vendor', { requires: { host: '^1.0.0' }, provides: { registers: { 'nic-type': ['example'] } } }),
    ],
  }, 'host', '/');
  t.deepEqual(set.plugins.map((p) => p.id), ['host']);
  t.true(set.catalog.declares('nic-type', 'example'), 'a disabled plugin\'s name');
  t.true(set.catalog.declares('nic-type', 'sriov'), 'a name the point\'s host declares for the API');
  t.false(set.catalog.declares('nic-type', 'warpnic'));
  t.false(set.catalog.declares('storage-driver', 'example'), 'names belong to their point');
});

test('unknown sets and ids, bad manifests and sdk ranges are refused', (t) => {
  const registry: RegistryFile = { plugins: [manifest('a', { sdk: '^3.0.0' }), { id: 'b' } as never], sets: { edge: ['a'] } };
  t.true(problems(registry, 'nosuch').some((p) => p.includes('"nosuch" is neither a plugin set')));
  t.true(problems(registry, 'a,zz').some((p) => p.includes('unknown plugin "zz"')));
  t.true(problems(registry, 'edge').some((p) => p.includes('a: needs sdk ^3.0.0')));
  t.true(problems(registry, 'edge').some((p) => p.includes('b: manifest field "entry" is missing')));
});

/** Whether a plugin at `version` meets a dependency `range`, as the loader judges it. */
const meets = (version: string, range: string): boolean =>
  problems({ plugins: [manifest('dep', { version }), manifest('user', { requires: { dep: range } })] }, 'dep,user').length === 0;

test('dependency ranges mean what npm means by them', (t) => {
  t.true(meets('1.2.3', '^1.0.0'));
  t.false(meets('2.0.0', '^1.0.0'));
  t.true(meets('0.1.5', '^0.1.0'));
  t.false(meets('0.2.0', '^0.1.0'));
  t.true(meets('0.0.3', '^0.0.3'));
  t.false(meets('0.0.5', '^0.0.3'), 'a caret on 0.0.x allows that patch only');
  t.false(meets('1.0.0-beta.1', '^1.0.0'), 'a prerelease does not satisfy a plain range');
  t.false(meets('1.3.0-rc.1', '>=1.0.0'));
  t.true(meets('1.2.9', '~1.2.0'));
  t.true(meets('3.0.0', '>=1.0.0 <4.0.0'));
  t.true(meets('5.0.0', '^1.0.0 || ^5.0.0'));
  t.true(meets('9.9.9', '*'));
  t.true(meets('1.7.0', '1.x'));
  t.false(meets('2.0.0', '1.x'));
  t.true(meets('1.2.7', '^1.2'));
  t.false(meets('1.1.0', '^1.2'));
  t.true(meets('1.0.0', '>= 1.0.0'), 'a space after the operator is allowed');
  t.true(meets('1.5.0', '1.2.0 - 1.6.0'));
});

test('a range or version that is not semver is refused with a message naming it', (t) => {
  const found = problems({
    plugins: [manifest('dep', { version: '1.0' }), manifest('user', { requires: { dep: 'one point oh' }, sdk: 'latest' })],
  }, 'dep,user');
  t.true(found.includes('dep: version "1.0" is not a semantic version'), found.join('\n'));
  t.true(found.includes('user requires dep "one point oh", which is not a valid semver range'), found.join('\n'));
  t.true(found.includes('user: sdk range "latest" is not a valid semver range'), found.join('\n'));
  t.true(problems({ plugins: [manifest('a', { sdk: '>= 1.0.0' })] }, 'a').length === 0, 'an sdk range with a space after the operator');
});

test('the shipped registry is valid for every set', (t) => {
  const registry = readRegistry(path.join(projectRoot, 'plugin-registry.json'));
  for (const set of Object.keys(registry.sets ?? {})) t.notThrows(() => resolvePluginSet(registry, set, projectRoot), set);
  t.truthy(registry.sets?.edge && registry.sets?.full);
});

test('the daemon refuses a bad set before starting anything, with a clear message and a non-zero exit', (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-loader-'));
  const registry = path.join(dir, 'registry.json');
  writeFileSync(registry, JSON.stringify({ plugins: [manifest('a', { requires: { b: '*' } }), manifest('b', { requires: { a: '*' } })] }));
  const run = spawnSync(process.execPath, [corrald, '--dir', path.join(dir, 'data'), '--registry', registry, '--plugins', 'a,b'], { encoding: 'utf8' });
  t.not(run.status, 0);
  t.regex(run.stderr, /dependency cycle: a -> b -> a/);
  t.false(existsSync(path.join(dir, 'data', 'unix.socket')));
  t.false(existsSync(path.join(dir, 'data', 'corral.pid')), 'the lock is released');
  const bad = spawnSync(process.execPath, [corrald, '--bogus'], { encoding: 'utf8' });
  t.not(bad.status, 0);
  t.regex(bad.stderr, /unknown argument "--bogus"/);
  t.truthy(readFileSync(registry, 'utf8'));
  rmSync(dir, { recursive: true, force: true });
});

test('a plugin whose host tool is missing, or whose entry cannot load, stops the start with its name', async (t) => {
  const { startTestKernel } = await import('../../sdk/testing/index.js');
  const dir = mkdtempSync(path.join(tmpdir(), 'corral-loader-'));
  const registry = path.join(dir, 'registry.json');
  writeFileSync(registry, JSON.stringify({
    plugins: [
      { ...manifest('needy'), entry: 'plugins/warnings/index.ts', hostTools: ['sh', 'no-such-tool-anywhere'] },
      { ...manifest('broken'), entry: 'plugins/does-not-exist/index.ts' },
    ],
  }));
  const needy = await t.throwsAsync(startTestKernel({ plugins: ['needy'], registry }));
  t.true(needy instanceof PluginSetError);
  t.regex(needy!.message, /needy needs "no-such-tool-anywhere", which is not installed/);
  t.notRegex(needy!.message, /"sh"/);
  const broken = await t.throwsAsync(startTestKernel({ plugins: ['broken'], registry }));
  t.regex(broken!.message, /broken: cannot load plugins\/does-not-exist\/index\.ts/);
  rmSync(dir, { recursive: true, force: true });
});
