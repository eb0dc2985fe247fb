/**
 * The usual setting of a container test through `lxc`: a daemon with its default pool in a
 * directory of its own and the busybox image imported as `bb`; and its end, which deletes the
 * instances, stops the daemons and throws the directory and the image away.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { killContainers, startWithPool, stopDaemons, type Daemon } from './daemon.js';
import { lxc } from './clients.js';
import { buildBusyboxImage, type BusyboxImage } from './busybox-image.js';

export interface BusyboxDaemon {
  d: Daemon;
  dir: string;
  image: BusyboxImage;
}

/**
 * `prefix` names the temporary data directory (tests running at once must not share one);
 * `plugins` the set (the edge set by default).
 */
export async function startBusyboxDaemon(prefix: string, plugins?: string): Promise<BusyboxDaemon> {
  const image = buildBusyboxImage('gzip');
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  const d = await startWithPool({ dir, plugins });
  const imported = await lxc(d.socket, 'image', 'import', image.unified, '--alias', 'bb');
  if (imported.status !== 0) throw new Error(`image import failed: ${imported.stderr}`);
  return { d, dir, image };
}

export async function stopBusyboxDaemon({ d, dir, image }: BusyboxDaemon): Promise<void> {
  const list = await lxc(d.socket, 'list', '--format', 'json').catch(() => undefined);
  for (const c of JSON.parse(list?.stdout || '[]')) await lxc(d.socket, 'delete', '--force', c.name);
  await stopDaemons();
  killContainers(dir);
  rmSync(dir, { recursive: true, force: true });
  rmSync(image.dir, { recursive: true, force: true });
}
