/**
 * Plugin entries that name an npm package (`"entry": "npm:corral-storage-example"`): found the way
 * Node finds a bare import from the registry file's directory (node_modules there or in a parent),
 * then the package's own entry point (`exports` "." for import, else `main`, else index.js).
 * Resolved here rather than by `import(name)` because that would resolve from the kernel's files,
 * not from where the operator installed the vendor's package.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
// plugin-set.js imports this module too: PluginSetError is only used when a lookup fails, long after both loaded.
import { PluginSetError } from './plugin-set.js';

export const PACKAGE_ENTRY_PREFIX = 'npm:';

/** npm's rule for a package name: optional @scope/, lower case, URL-safe, no leading dot or underscore. */
const PACKAGE_NAME = /^(?:@[a-z0-9~-][a-z0-9._~-]*\/)?[a-z0-9~-][a-z0-9._~-]*$/;

export const isPackageEntry = (entry: string): boolean => entry.startsWith(PACKAGE_ENTRY_PREFIX);

export function packageEntryProblem(entry: string): string | undefined {
  const name = entry.slice(PACKAGE_ENTRY_PREFIX.length);
  return PACKAGE_NAME.test(name) ? undefined : `"${entry}" does not name an npm package (npm:<name> or npm:@scope/<name>)`;
}

/** The file to import for `npm:<name>`, looked up from `baseDir` upwards. */
export function resolvePackageEntry(entry: string, baseDir: string): string {
  const name = entry.slice(PACKAGE_ENTRY_PREFIX.length);
  for (let dir = path.resolve(baseDir); ; dir = path.dirname(dir)) {
    const pkgDir = path.join(dir, 'node_modules', name);
    if (existsSync(path.join(pkgDir, 'package.json'))) return mainFile(pkgDir, entry);
    if (path.dirname(dir) === dir) break;
  }
  throw new PluginSetError([`plugin entry "${entry}": the package "${name}" is not installed in a node_modules beside ${path.resolve(baseDir)} or above it`]);
}

function mainFile(pkgDir: string, entry: string): string {
  let pkg: { exports?: unknown; main?: unknown };
  try {
    pkg = JSON.parse(readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));
  } catch (err) {
    throw new PluginSetError([`plugin entry "${entry}": cannot read ${path.join(pkgDir, 'package.json')}: ${(err as Error).message}`]);
  }
  const target = rootExport(pkg.exports) ?? (typeof pkg.main === 'string' ? pkg.main : 'index.js');
  const file = path.resolve(pkgDir, target);
  if (!file.startsWith(pkgDir + path.sep)) throw new PluginSetError([`plugin entry "${entry}": its entry point "${target}" lies outside the package`]);
  return file;
}

/** `exports` as a string, or its "." entry, through the import / node / default conditions. */
function rootExport(exports: unknown): string | undefined {
  if (typeof exports === 'string') return exports;
  if (!exports || typeof exports !== 'object') return undefined;
  const map = exports as Record<string, unknown>;
  const root = Object.keys(map).some((k) => k.startsWith('.')) ? map['.'] : map;
  return conditional(root);
}

function conditional(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (!value || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const map = value as Record<string, unknown>;
  for (const condition of ['import', 'node', 'default']) {
    const found = conditional(map[condition]);
    if (found) return found;
  }
  return undefined;
}
