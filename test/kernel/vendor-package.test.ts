/**
 * A vendor plugin installed as an npm package: examples/storage-example is packed with `npm pack`
 * and installed offline from the tarball into a scratch project, whose plugin registry names it as
 * `npm:corral-storage-example`. The package imports the contract as `corral/sdk` (no path into
 * corral); the scratch project's node_modules/corral is the corral installation, as an operator's
 * would be. The daemon runs it and the lxc client uses its driver.
 */
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { distRoot, projectRoot, startDaemon, stopDaemons } from '../helpers/daemon.js';
import { lxc, lxcOk } from '../helpers/clients.js';
import { withLxcClient } from '../helpers/needs.js';
import { startTestKernel } from '../../sdk/testing/index.js';

const lxcTest = withLxcClient();
const PACKAGE = 'corral-storage-example';

let work: string;
let project: string;
let registryFile: string;

test.before(() => {
  work = mkdtempSync(path.join(tmpdir(), 'corral-vendor-'));
  // The package as its vendor would publish it: its package.json and its built module.
  const src = path.join(work, 'src');
  mkdirSync(src);
  copyFileSync(path.join(projectRoot, 'examples', 'storage-example', 'package.json'), path.join(src, 'package.json'));
  copyFileSync(path.join(distRoot, 'examples', 'storage-example', 'index.js'), path.join(src, 'index.js'));
  const npm = (cwd: string, ...args: string[]) => execFileSync('npm', [...args, '--offline', '--no-audit', '--no-fund', '--cache', path.join(work, 'npm-cache')], { cwd, stdio: 'pipe', timeout: 120_000 }).toString();
  const tarball = npm(src, 'pack', '--pack-destination', work).trim().split('\n').pop()!;
  project = path.join(work, 'project');
  mkdirSync(project);
  writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'vendor-host', version: '1.0.0', private: true }));
  npm(project, 'install', '--ignore-scripts', path.join(work, tarball));
  // The operator's corral installation, where the package's `corral/sdk` resolves.
  symlinkSync(projectRoot, path.join(project, 'node_modules', 'corral'), 'dir');

  // The project's registry, with the example named by package instead of by path.
  const registry = JSON.parse(readFileSync(path.join(projectRoot, 'plugin-registry.json'), 'utf8'));
  registry.plugins = registry.plugins.map((m: { id: string; entry: string }) => (m.id === 'storage-example' ? { ...m, entry: `npm:${PACKAGE}` } : m));
  registryFile = path.join(project, 'plugin-registry.json');
  writeFileSync(registryFile, JSON.stringify(registry, null, 2));
});

test.after.always(async () => {
  await stopDaemons();
  if (work) rmSync(work, { recursive: true, force: true });
});

test.serial('the packed example installs as a package that imports the contract by name', (t) => {
  const installed = path.join(project, 'node_modules', PACKAGE);
  t.true(existsSync(path.join(installed, 'index.js')));
  const code = readFileSync(path.join(installed, 'index.js'), 'utf8');
  t.regex(code, /from 'corral\/sdk'/);
  t.notRegex(code, /from '\.\.?\//, 'no relative import into corral');
});

test.serial('a test kernel loads the package entry and its driver serves pools and volumes', async (t) => {
  const k = await startTestKernel({ plugins: 'storage,storage-example', registry: registryFile });
  try {
    const source = path.join(work, 'kernel-pool');
    const created = await k.inject({ method: 'POST', url: '/1.0/storage-pools', payload: { name: 'vp', driver: 'example', config: { source } } });
    t.true(created.statusCode < 300, created.body);
    const vol = await k.inject({ method: 'POST', url: '/1.0/storage-pools/vp/volumes/custom', payload: { name: 'v1' } });
    t.true(vol.statusCode < 300, vol.body);
    t.true(existsSync(path.join(source, 'custom', 'default_v1')) || existsSync(path.join(source, 'custom', 'v1')), 'the volume is a directory under the pool');
    // A mistake in the package's contract use still reaches the client as an API error of the kernel's own kind.
    const bad = await k.inject({ method: 'POST', url: '/1.0/storage-pools/vp/volumes/custom', payload: { name: 'v1' } });
    t.is(bad.statusCode, 409, bad.body);
    t.is((await k.inject({ method: 'DELETE', url: '/1.0/storage-pools/vp/volumes/custom/v1' })).statusCode, 200);
    t.is((await k.inject({ method: 'DELETE', url: '/1.0/storage-pools/vp' })).statusCode, 200);
  } finally {
    await k.stop();
  }
});

test.serial('a package entry that is not installed is refused at start, naming the package', async (t) => {
  const registry = JSON.parse(readFileSync(registryFile, 'utf8'));
  registry.plugins = registry.plugins.map((m: { id: string }) => (m.id === 'storage-example' ? { ...m, entry: 'npm:corral-not-installed' } : m));
  const other = path.join(work, 'missing-registry.json');
  writeFileSync(other, JSON.stringify(registry));
  const err = await t.throwsAsync(startTestKernel({ plugins: 'storage,storage-example', registry: other }));
  t.regex(err!.message, /the package "corral-not-installed" is not installed/);
  registry.plugins = registry.plugins.map((m: { id: string }) => (m.id === 'storage-example' ? { ...m, entry: 'npm:../escape' } : m));
  writeFileSync(other, JSON.stringify(registry));
  const bad = await t.throwsAsync(startTestKernel({ plugins: 'storage,storage-example', registry: other }));
  t.regex(bad!.message, /does not name an npm package/);
});

lxcTest('corrald --registry with the package entry: lxc storage create and volume create on the vendor driver', async (t) => {
  const d = await startDaemon({ plugins: 'storage,storage-example', args: ['--registry', registryFile] });
  const source = path.join(work, 'daemon-pool');
  await lxcOk(t, d.socket, 'storage', 'create', 'vendorpool', 'example', `source=${source}`);
  t.regex(await lxcOk(t, d.socket, 'storage', 'show', 'vendorpool'), /driver: example/);
  await lxcOk(t, d.socket, 'storage', 'volume', 'create', 'vendorpool', 'v1');
  t.regex(await lxcOk(t, d.socket, 'storage', 'volume', 'list', 'vendorpool', '--format', 'csv'), /custom,v1,/);
  const dup = await lxc(d.socket, 'storage', 'volume', 'create', 'vendorpool', 'v1');
  t.not(dup.status, 0);
  t.regex(dup.stderr, /already exists/i);
  await lxcOk(t, d.socket, 'storage', 'volume', 'delete', 'vendorpool', 'v1');
  await lxcOk(t, d.socket, 'storage', 'delete', 'vendorpool');
  t.false(existsSync(path.join(source, 'custom')), 'the vendor driver removed its pool');
});
