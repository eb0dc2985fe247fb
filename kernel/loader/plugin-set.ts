/**
 * Reads plugin-registry.json and validates a whole plugin set before any plugin code runs:
 * unknown ids, missing or out-of-range dependencies, cycles, bad sdk ranges, and two plugins
 * claiming one extension name, driver, type, config key prefix, db namespace or name in one
 * extension point.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { SDK_VERSION, twinOf, type PluginCatalog, type PluginManifest } from '../../sdk/index.js';
import { checkClaims } from '../extensions/registry.js';
import { isPackageEntry, packageEntryProblem, resolvePackageEntry } from './package-entry.js';
import semver from 'semver';

export interface RegistryFile {
  kernel?: { provides?: { extensions?: string[] } };
  plugins: PluginManifest[];
  sets?: Record<string, string[]>;
}

export interface PluginSet {
  /** Directory of the registry file: entries resolve against it. */
  baseDir: string;
  /** Enabled manifests in dependency order. */
  plugins: PluginManifest[];
  kernelExtensions: string[];
  /** Every manifest of the registry, enabled or not: which names exist under which extension point. */
  catalog: PluginCatalog;
}

export class PluginSetError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid plugin set:\n  - ${problems.join('\n  - ')}`);
    this.name = 'PluginSetError';
  }
}

export function readRegistry(file: string): RegistryFile {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new PluginSetError([`cannot read plugin registry ${file}: ${(err as Error).message}`]);
  }
  const registry = parsed as RegistryFile;
  if (!registry || !Array.isArray(registry.plugins)) throw new PluginSetError([`${file}: "plugins" must be a list of manifests`]);
  return registry;
}

/**
 * `selection` is a set name from the registry or a comma-separated list of plugin ids and set
 * names (`full,storage-example`: a set plus a vendor's plugin).
 */
export function resolvePluginSet(registry: RegistryFile, selection: string, baseDir: string): PluginSet {
  const problems: string[] = [];
  const byId = new Map<string, PluginManifest>();
  for (const [i, m] of registry.plugins.entries()) {
    const label = typeof m?.id === 'string' ? m.id : `plugin #${i + 1}`;
    for (const field of ['id', 'entry', 'version', 'sdk'] as const) {
      if (typeof m?.[field] !== 'string' || !m[field]) problems.push(`${label}: manifest field "${field}" is missing`);
    }
    if (typeof m?.entry === 'string' && isPackageEntry(m.entry)) {
      const problem = packageEntryProblem(m.entry);
      if (problem) problems.push(`${label}: ${problem}`);
    }
    if (typeof m?.id !== 'string') continue;
    if (byId.has(m.id)) problems.push(`plugin id "${m.id}" appears twice in the registry`);
    byId.set(m.id, m);
  }

  const ids = registry.sets?.[selection] ?? [...new Set(selection.split(',').map((s) => s.trim()).filter(Boolean).flatMap((s) => registry.sets?.[s] ?? [s]))];
  if (!registry.sets?.[selection] && ids.length === 1 && !byId.has(ids[0]!)) {
    problems.push(`"${selection}" is neither a plugin set (${Object.keys(registry.sets ?? {}).join(', ') || 'none defined'}) nor a plugin id`);
  }
  const enabled = new Map<string, PluginManifest>();
  for (const id of ids) {
    const m = byId.get(id);
    if (!m) {
      if (ids.length > 1 || registry.sets?.[selection]) problems.push(`unknown plugin "${id}" in "${selection}"`);
    } else enabled.set(id, m);
  }

  // Ranges mean what npm means by them (`^0.0.3` is 0.0.3 only; a prerelease never satisfies a
  // plain range), so a vendor's manifest reads the same here as in its package.json.
  for (const m of enabled.values()) {
    if (typeof m.version === 'string' && !semver.valid(m.version)) problems.push(`${m.id}: version "${m.version}" is not a semantic version`);
    if (typeof m.sdk === 'string') {
      if (!semver.validRange(m.sdk)) problems.push(`${m.id}: sdk range "${m.sdk}" is not a valid semver range`);
      else if (!semver.satisfies(SDK_VERSION, m.sdk)) problems.push(`${m.id}: needs sdk ${m.sdk}, this kernel provides sdk ${SDK_VERSION}`);
    }
    for (const [dep, range] of Object.entries(m.requires ?? {})) {
      const target = byId.get(dep);
      if (typeof range !== 'string' || !semver.validRange(range)) problems.push(`${m.id} requires ${dep} "${String(range)}", which is not a valid semver range`);
      else if (!target) problems.push(`${m.id} requires "${dep}", which is not in the registry`);
      else if (!enabled.has(dep)) problems.push(`${m.id} requires "${dep}", which is not enabled in "${selection}"`);
      else if (!semver.satisfies(target.version, range)) problems.push(`${m.id} requires ${dep} ${range}, but the registry has ${dep} ${target.version}`);
    }
  }

  problems.push(...claimProblems(registry.kernel?.provides?.extensions ?? [], [...enabled.values()]));
  const { order, cycle } = dependencyOrder([...enabled.values()]);
  if (cycle.length) problems.push(`dependency cycle: ${cycle.join(' -> ')}`);
  if (problems.length) throw new PluginSetError(problems);
  return { baseDir, plugins: order, kernelExtensions: registry.kernel?.provides?.extensions ?? [], catalog: catalogOf(registry.plugins) };
}

/** Names declared under each extension point by any manifest, whether or not its plugin is enabled. */
export function catalogOf(manifests: PluginManifest[]): PluginCatalog {
  const declared = new Set<string>();
  for (const m of manifests) {
    for (const source of [m.provides?.registers, m.provides?.extensionPoints]) {
      for (const [point, names] of Object.entries(source ?? {})) for (const name of names) declared.add(`${point}\0${name}`);
    }
  }
  return { declares: (point, name) => declared.has(`${point}\0${name}`) };
}

/** Nothing may be provided twice: extension names, drivers, types, key prefixes, db namespaces. */
function claimProblems(kernelExtensions: string[], plugins: PluginManifest[]): string[] {
  const problems = checkClaims(new Map(), 'the kernel', kernelExtensions);
  // One feature, two spellings (the spec's and the reference's): claiming one alone would leave
  // the clients that look for the other believing the feature is missing.
  for (const [owner, names] of [['the kernel', kernelExtensions], ...plugins.map((m) => [m.id, m.provides?.extensions ?? []] as const)] as const) {
    for (const name of names) {
      const twin = twinOf(name);
      if (twin !== undefined && !names.includes(twin)) problems.push(`${owner} claims api extension "${name}" but not its other spelling "${twin}"; claim both`);
    }
  }
  const offered = new Set(plugins.flatMap((m) => Object.keys(m.provides?.extensionPoints ?? {})));
  for (const m of plugins) {
    for (const point of Object.keys(m.provides?.registers ?? {})) {
      if (!offered.has(point)) problems.push(`${m.id} registers into extension point "${point}", which no enabled plugin offers`);
    }
  }
  const claimedExtensions = new Map(kernelExtensions.map((n) => [n, 'the kernel']));
  const owners = new Map<string, string>();
  for (const m of plugins) {
    problems.push(...checkClaims(claimedExtensions, m.id, m.provides?.extensions ?? []));
    const things: [string, string[]][] = [
      ['driver', m.provides?.drivers ?? []],
      ['type', m.provides?.types ?? []],
      ['config key prefix', m.provides?.configKeys ?? []],
      ['db namespace', [m.provides?.dbNamespace ?? m.id]],
      ...Object.entries(m.provides?.registers ?? {}),
    ];
    for (const [kind, names] of things) {
      for (const name of names) {
        const key = `${kind}:${name}`;
        const other = owners.get(key);
        if (other !== undefined) problems.push(`${kind} "${name}" is provided by both ${other} and ${m.id}`);
        owners.set(key, m.id);
      }
    }
  }
  return problems;
}

/** Dependencies first, registry order otherwise; reports one cycle if there is one. */
function dependencyOrder(plugins: PluginManifest[]): { order: PluginManifest[]; cycle: string[] } {
  const byId = new Map(plugins.map((m) => [m.id, m]));
  const order: PluginManifest[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  let cycle: string[] = [];
  const visit = (m: PluginManifest, trail: string[]): void => {
    if (state.get(m.id) === 'done' || cycle.length) return;
    if (state.get(m.id) === 'visiting') {
      cycle = [...trail.slice(trail.indexOf(m.id)), m.id];
      return;
    }
    state.set(m.id, 'visiting');
    for (const dep of Object.keys(m.requires ?? {})) {
      const target = byId.get(dep);
      if (target) visit(target, [...trail, m.id]);
    }
    state.set(m.id, 'done');
    order.push(m);
  };
  for (const m of plugins) visit(m, []);
  return { order, cycle };
}

/**
 * Where a manifest's entry module is: `.ts` sources map to the compiled tree next to the kernel,
 * `npm:<package>` is an installed package found from the registry's directory, anything else is a
 * path relative to that directory.
 */
export function entryPath(baseDir: string, entry: string, compiledRoot: string): string {
  if (isPackageEntry(entry)) return resolvePackageEntry(entry, baseDir);
  if (entry.endsWith('.ts')) return path.join(compiledRoot, entry.replace(/\.ts$/, '.js'));
  return path.resolve(baseDir, entry);
}
