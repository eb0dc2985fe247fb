/** What the bundle tests (edge-bundle, full-bundle) share: the one-file check and the end of a bundle's daemon. */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { killContainers, type Daemon } from './daemon.js';
import { lxc } from './clients.js';

/** `npm run build` made `bundle`, one file: nothing of the kernel, sdk or plugins imported from dist/. */
export function checkOneFile(t: { true(v: boolean, m?: string): unknown; notRegex(s: string, r: RegExp): unknown }, bundle: string): void {
  t.true(existsSync(bundle), `${bundle} is missing: npm run build makes it`);
  const text = readFileSync(bundle, 'utf8');
  t.notRegex(text, /from\s*["']\.\.?\//);
  t.notRegex(text, /import\(["']\.\.?\//);
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
