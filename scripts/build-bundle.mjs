#!/usr/bin/env node
/**
 * Bundles the daemon and one plugin set of plugin-registry.json into a single file, from the compiled
 * tree (run after tsc): `node scripts/build-bundle.mjs edge` writes dist/bundle/corrald-edge.bundle.cjs
 * and dist/bundle/corrald-edge.cjs, the loader that runs it with V8's code cache (scripts/bundle-loader.cjs).
 * One file parses and links far faster than hundreds of modules and keeps less of them in memory
 * (decision 0002). The entry is generated from the registry's set, so nothing here names a plugin.
 *
 * Left outside, as files the bundle loads or runs: native addons (sqlite3, node-pty), the cluster's
 * etcd client (only a clustered daemon loads it, on first use), and the helpers plugins spawn (the C
 * helpers and scripts under dist/), which the bundle finds where the compiled tree has them: each
 * module's `import.meta.url` is rewritten to its own file's place in dist/.
 */
import { build } from 'esbuild-wasm';
import { readFileSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = path.join(root, 'dist');
const setName = process.argv[2] ?? 'edge';
const registry = JSON.parse(readFileSync(path.join(root, 'plugin-registry.json'), 'utf8'));
const ids = registry.sets?.[setName];
if (!ids) {
  console.error(`build-bundle: no plugin set "${setName}" in plugin-registry.json`);
  process.exit(1);
}
const outDir = path.join(dist, 'bundle');
/** What is run: the loader (scripts/bundle-loader.cjs), which compiles the bundle beside it with V8's code cache. */
const outFile = path.join(outDir, `corrald-${setName}.cjs`);
const bundleFile = path.join(outDir, `corrald-${setName}.bundle.cjs`);

const entries = ids.map((id) => {
  const manifest = registry.plugins.find((p) => p.id === id);
  if (!manifest?.entry?.endsWith('.ts')) throw new Error(`build-bundle: plugin "${id}" has no in-tree .ts entry to bundle`);
  return { id, file: './' + manifest.entry.replace(/\.ts$/, '.js') };
});
// What bin/corrald.js does, with the set's modules handed to the kernel instead of imported by path.
const entrySource = `
import './bin/boot-without-optimizer.js';
import { resumeOptimizer } from './kernel/boot-optimizer.js';
import { SUBCOMMANDS } from './bin/commands/index.js';
import { runDaemonCommand } from './bin/run-daemon.js';
${entries.map((e, i) => `import * as plugin${i} from ${JSON.stringify(e.file)};`).join('\n')}
const modules = { ${entries.map((e, i) => `${JSON.stringify(e.id)}: plugin${i}`).join(', ')} };
const subcommand = SUBCOMMANDS[process.argv[2] ?? ''];
const main = subcommand
  ? (async () => { resumeOptimizer(); process.exit(await (await subcommand()).run(process.argv.slice(3))); })()
  : runDaemonCommand(process.argv.slice(2), { set: ${JSON.stringify(setName)}, modules });
// As a module's top-level await did: what fails at start is printed and ends the process.
main.catch((error) => { console.error(error); process.exit(1); });
`;

/** Each compiled module keeps seeing its own file as `import.meta.url`, so paths it derives from it still hold. */
const ownUrl = {
  name: 'own-import-meta-url',
  setup(b) {
    b.onLoad({ filter: /\.js$/ }, (args) => {
      if (!args.path.startsWith(dist + path.sep)) return undefined;
      const text = readFileSync(args.path, 'utf8');
      if (!text.includes('import.meta.')) return undefined;
      const rel = path.relative(outDir, args.path).split(path.sep).join('/');
      // A script has no import.meta: the loader hands in the bundle's URL, and a package a module
      // resolves (as an ES module) is resolved here, to its place relative to the bundle.
      const contents = text
        .replaceAll('import.meta.url', `new URL(${JSON.stringify(rel)}, __corralBundleUrl).href`)
        .replace(/import\.meta\.resolve\(('[^']+'|"[^"]+")\)/g, (_, quoted) => {
          const target = path.relative(outDir, fileURLToPath(import.meta.resolve(quoted.slice(1, -1)))).split(path.sep).join('/');
          return `new URL(${JSON.stringify(target)}, __corralBundleUrl).href`;
        });
      if (contents.includes('import.meta.')) throw new Error(`build-bundle: ${args.path} uses import.meta in a way the bundle cannot keep (import.meta.resolve takes a literal here)`);
      return { contents, loader: 'js' };
    });
  },
};

/**
 * Packages left outside. An ESM bundle would hoist an import of them to its top and load them at start
 * even when only a lazily loaded module needs them (etcd3 for a clustered daemon); reached through a
 * small CommonJS module that requires them instead, they load when the module that imports them runs.
 */
const OUTSIDE = ['sqlite3', 'node-pty', 'etcd3', 'cockatiel'];
const requiredWhenUsed = {
  name: 'required-when-used',
  setup(b) {
    const filter = new RegExp(`^(${OUTSIDE.join('|')})$`);
    b.onResolve({ filter }, (args) => (args.namespace === 'outside' ? { path: args.path, external: true } : { path: args.path, namespace: 'outside' }));
    b.onLoad({ filter: /.*/, namespace: 'outside' }, (args) => ({ contents: `module.exports = require(${JSON.stringify(args.path)});`, loader: 'js' }));
  },
};

/**
 * hapi reads its media-type table (mime-db, ~2,500 types, ~150 KB) for one thing: whether an answer of a
 * type may be compressed (corral's listeners do not compress at all). For a type the table lacks,
 * @hapi/mimos decides by a rule on the name; the bundle keeps only the types whose entry says otherwise
 * (41), so every type is still decided as before, with ~1 MiB less heap at start. Types by file
 * extension, which corral never asks hapi for, go with the rest.
 */
const compressibilityOnly = {
  name: 'compressibility-only',
  setup(b) {
    b.onLoad({ filter: /[\\/]mime-db[\\/]db\.json$/ }, (args) => {
      const table = JSON.parse(readFileSync(args.path, 'utf8'));
      // The rule @hapi/mimos applies to a type it does not find.
      const byName = /^text\/|\+json$|\+text$|\+xml$/;
      const kept = Object.entries(table).filter(([type, entry]) => entry.compressible !== undefined && entry.compressible !== byName.test(type));
      return { contents: JSON.stringify(Object.fromEntries(kept.map(([type, entry]) => [type, { compressible: entry.compressible }]))), loader: 'json' };
    });
  },
};

/**
 * A package that was not installed when the bundle was built (optional ones, which bunyan and ws try
 * at load and do without): required from the bundle, node would search every node_modules directory
 * up from it at each start before failing. It fails at once instead, as a missing package does.
 */
const absentFailsAtOnce = {
  name: 'absent-fails-at-once',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, async (args) => {
      if (args.pluginData?.probing || args.path.startsWith('node:')) return undefined;
      const found = await b.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, importer: args.importer, pluginData: { probing: true } });
      return found.errors.length ? { path: args.path, namespace: 'absent' } : undefined;
    });
    b.onLoad({ filter: /.*/, namespace: 'absent' }, (args) => ({
      contents: `throw Object.assign(new Error(${JSON.stringify(`Cannot find module '${args.path}'`)}), { code: 'MODULE_NOT_FOUND' });`,
      loader: 'js',
    }));
  },
};

mkdirSync(outDir, { recursive: true });
const result = await build({
  stdin: { contents: entrySource, resolveDir: dist, sourcefile: `corrald-${setName}-entry.js`, loader: 'js' },
  bundle: true,
  platform: 'node',
  // CommonJS, so that the loader can compile it as a script with a code cache (node 20 has none for modules).
  format: 'cjs',
  target: 'node20',
  outfile: bundleFile,
  // Smaller source: V8 keeps a script's whole text in memory for as long as it runs. Names stay (keepNames).
  minify: true,
  keepNames: true,
  // hapi validates its own options with @hapi/validate, a cut-down copy of joi; the bundle has joi for the
  // plugins' shapes already, and building one validator's types at start instead of two is 5–15 ms and ~1 MiB.
  alias: { '@hapi/validate': 'joi' },
  // The default, kept explicit: the loader reads the bundle as latin1 (no UTF-8 decoding), checked below.
  charset: 'ascii',
  legalComments: 'none',
  logLevel: 'warning',
  plugins: [ownUrl, requiredWhenUsed, compressibilityOnly, absentFailsAtOnce],
  metafile: true,
});
// What went in, by size: the next thing to make lazy or leave out is found here.
writeFileSync(outFile.replace(/\.cjs$/, '.meta.json'), JSON.stringify(result.metafile));
if (readFileSync(bundleFile).some((byte) => byte > 0x7f)) throw new Error(`build-bundle: ${bundleFile} is not ASCII only, and the loader reads it as latin1`);
writeFileSync(outFile, readFileSync(path.join(root, 'scripts', 'bundle-loader.cjs'), 'utf8').replaceAll('@BUNDLE@', path.basename(bundleFile)));
const bytes = Object.values(result.metafile.outputs).reduce((n, o) => n + o.bytes, 0);
console.log(`build-bundle: ${path.relative(root, outFile)} (${ids.length} plugins, ${(bytes / 1024 / 1024).toFixed(1)} MiB)`);
