/**
 * The files the UI serves, read into memory at start: the page's own files from static/ and the
 * front-end library's ES modules from node_modules, as published (no build step, no CDN).
 */
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export interface Asset {
  body: Buffer;
  contentType: string;
}

/** Served name (under /ui/) → file. */
export type Assets = ReadonlyMap<string, Asset>;

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/**
 * The library modules the page imports by bare name (its import map points these names at vendor/), as
 * the files node resolves for an ES module. Literal specifiers: the bundle resolves them when it is built.
 */
const VENDOR: Record<string, () => string> = {
  'vendor/preact.mjs': () => import.meta.resolve('preact'),
  'vendor/preact-hooks.mjs': () => import.meta.resolve('preact/hooks'),
  'vendor/htm.mjs': () => import.meta.resolve('htm'),
};

/** static/ sits in the source tree beside this plugin; the module runs from dist/plugins/web-ui/. */
export const STATIC_DIR = fileURLToPath(new URL('../../../plugins/web-ui/static/', import.meta.url));

export function loadAssets(staticDir = STATIC_DIR): Assets {
  const assets = new Map<string, Asset>();
  for (const name of readdirSync(staticDir)) {
    const type = TYPES[path.extname(name)];
    if (type) assets.set(name, { body: readFileSync(path.join(staticDir, name)), contentType: type });
  }
  for (const [name, resolve] of Object.entries(VENDOR)) {
    assets.set(name, { body: readFileSync(fileURLToPath(resolve())), contentType: TYPES['.mjs']! });
  }
  if (!assets.has('index.html')) throw new Error(`web-ui: no index.html in ${staticDir}`);
  return assets;
}
