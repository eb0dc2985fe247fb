#!/usr/bin/env node
/**
 * Writes the generated docs of a build (default `full`) from what its plugins register:
 * config-keys.md (the key registry), routes.md (the route descriptors) and openapi.json (the API
 * description the daemon serves at GET /openapi.json).
 *
 *   gen-docs [--out <dir>] [set]    (default dir: the project's docs/)
 *
 * The docs check test writes into a scratch dir and compares with the committed files.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kernel } from '../kernel/kernel.js';
import { renderConfigKeys } from './docs/config-keys.js';
import { renderRouteTable } from './docs/route-table.js';

const compiledRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const projectRoot = path.resolve(compiledRoot, '..');

const argv = process.argv.slice(2);
const outAt = argv.indexOf('--out');
const outDir = outAt >= 0 ? path.resolve(argv[outAt + 1] ?? '') : path.join(projectRoot, 'docs');
const set = argv.filter((_, i) => i !== outAt && i !== outAt + 1)[0] ?? 'full';
if (outAt >= 0 && !argv[outAt + 1]) {
  console.error('gen-docs: --out needs a directory');
  process.exit(2);
}

// The real kernel with an in-memory store and no listeners: what the plugins register is all it reads.
const dataDir = mkdtempSync(path.join(tmpdir(), 'corral-docs-'));
try {
  const kernel = await Kernel.start({
    dataDir,
    storeFile: ':memory:',
    registryFile: path.join(projectRoot, 'plugin-registry.json'),
    plugins: set,
    compiledRoot,
    logLevel: 'fatal',
    serverCertificate: false,
  });
  const keys = kernel.keys.list();
  const routes = kernel.pipeline.registered();
  mkdirSync(outDir, { recursive: true });
  writeFileSync(path.join(outDir, 'config-keys.md'), renderConfigKeys(keys));
  writeFileSync(path.join(outDir, 'routes.md'), renderRouteTable(routes));
  writeFileSync(path.join(outDir, 'openapi.json'), `${JSON.stringify(kernel.describeApi(), null, 2)}\n`);
  await kernel.stop();
  console.log(`${path.join(outDir, 'config-keys.md')}: ${keys.length} keys; ${path.join(outDir, 'routes.md')}: ${routes.length} routes; ${path.join(outDir, 'openapi.json')}`);
} finally {
  rmSync(dataDir, { recursive: true, force: true });
}
