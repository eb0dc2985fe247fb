/** What the bundle tests (edge-bundle, full-bundle) share: the one-file check and the end of a bundle's daemon. */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { killContainers, type Daemon } from './daemon.js';
import { lxc } from './clients.js';

/**
 * `npm run build` made `loader` and the one file of code it runs beside it (`<name>.bundle.cjs`):
 * nothing of the kernel, sdk or plugins is imported or required from dist/.
 */
export function checkOneFile(t: { true(v: boolean, m?: string): unknown; notRegex(s: string, r: RegExp): unknown }, loader: string): void {
  const bundle = loader.replace(/\.cjs$/, '.bundle.cjs');
  for (const file of [loader, bundle]) {
    t.true(existsSync(file), `${file} is missing: npm run build makes it`);
    const text = readFileSync(file, 'utf8');
    t.notRegex(text, /from\s*["']\.\.?\//);
    t.notRegex(text, /(import|require)\(["']\.\.?\//);
  }
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
