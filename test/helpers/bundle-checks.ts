/** What the bundle tests (edge-bundle, full-bundle) share: the one-file check and the end of a bundle's daemon. */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { killContainers, type Daemon } from './daemon.js';
import { lxc } from './clients.js';

/** Packages the bundle leaves outside on purpose, required when used (scripts/build-bundle.mjs). */
const OUTSIDE = new Set(['sqlite3', 'node-pty', 'etcd3', 'cockatiel']);
/** Packages the daemon's own modules require on first use (createRequire): in node_modules, not in the bundle's text. */
const FIRST_USE = ['yaml', 're2js', 'protobufjs'];

/**
 * `npm run build` made `loader` and the one file of code it runs beside it (`<name>.bundle.cjs`):
 * nothing of the kernel, sdk or plugins is imported or required from dist/. The bundle is ASCII only
 * (the loader reads it as latin1), and requires no package but those left outside on purpose: one
 * that was absent at build (an optional one) fails at once rather than being searched for at each start.
 */
export function checkOneFile(t: { true(v: boolean, m?: string): unknown; notRegex(s: string, r: RegExp): unknown; deepEqual(a: unknown, b: unknown, m?: string): unknown }, loader: string): void {
  const bundle = loader.replace(/\.cjs$/, '.bundle.cjs');
  // latin1: every byte stays one character, so a byte above 0x7f shows.
  const [, text] = [loader, bundle].map((file) => {
    t.true(existsSync(file), `${file} is missing: npm run build makes it`);
    const read = readFileSync(file, 'latin1');
    t.notRegex(read, /from\s*["']\.\.?\//);
    t.notRegex(read, /(import|require)\(["']\.\.?\//);
    return read;
  }) as [string, string];
  t.notRegex(text, /[^\x00-\x7f]/);
  const required = [...text.matchAll(/\brequire\("([^"]+)"\)/g)].map((m) => m[1]!).filter((name) => !isBuiltin(name) && !OUTSIDE.has(name));
  t.deepEqual([...new Set(required)], [], 'packages the bundle would look for at run time');
  // The build's record of what went in (scripts/build-bundle.mjs writes it beside the loader).
  const inputs = Object.keys((JSON.parse(readFileSync(loader.replace(/\.cjs$/, '.meta.json'), 'utf8')) as { inputs: Record<string, unknown> }).inputs);
  t.deepEqual(FIRST_USE.filter((name) => inputs.some((file) => file.startsWith(`node_modules/${name}/`))), [], 'packages loaded on first use that went into the bundle');
}

/** Delete what the daemon holds, stop it, and throw its data directory and the test image away. */
export async function endBundleDaemon(d: Daemon | undefined, dir: string, imageDir?: string): Promise<void> {
  if (d) {
    const list = await lxc(d.socket, 'list', '--format', 'json').catch(() => undefined);
    for (const c of JSON.parse(list?.stdout || '[]')) await lxc(d.socket, 'delete', '--force', c.name);
    await d.stop();
  }
  killContainers(dir);
  rmSync(dir, { recursive: true, force: true });
  if (imageDir) rmSync(imageDir, { recursive: true, force: true });
}
