/**
 * The yaml package, loaded when something first reads or writes YAML (backups, image and template
 * metadata, `corrald init`). Imported at start it cost every daemon ~0.4 MiB and ~117 KB of the edge
 * bundle's text for files most daemons never touch (decision 0002). Required, not bundled: the bundle
 * leaves it in node_modules, where the edge install has it.
 */
import { createRequire } from 'node:module';

type YamlModule = typeof import('yaml');

let loaded: YamlModule | undefined;

export function yaml(): YamlModule {
  loaded ??= createRequire(import.meta.url)('yaml') as YamlModule;
  return loaded;
}
