/**
 * Where most container tests start: the busybox image built, a daemon once `--init auto` has made
 * its pool, and the image imported under an alias. stopImageDaemons() undoes all of it.
 */
import { rmSync } from 'node:fs';
import { killContainers, startWithPool, stopDaemons, type Daemon } from './daemon.js';
import { buildBusyboxImage, type BusyboxImage } from './busybox-image.js';
import { importImage } from './api.js';
import { lxc } from './clients.js';

/** A daemon with the image it was given (its tarballs stay on disk until stopImageDaemons()). */
export interface ImageDaemon extends Daemon {
  image: BusyboxImage;
}

export interface ImageDaemonOptions {
  /** The plugin set (startWithPool's default, `edge`, when left out). */
  plugins?: string;
  /** The alias the image gets; `bb` when left out. */
  alias?: string;
  /** Import through the REST API (default) or through the real `lxc image import`. */
  importWith?: 'api' | 'lxc';
  /** Added to the daemon's environment. */
  env?: NodeJS.ProcessEnv;
}

const daemons: Daemon[] = [];
const images: BusyboxImage[] = [];

export async function startWithImage(opts: ImageDaemonOptions = {}): Promise<ImageDaemon> {
  const image = buildBusyboxImage('gzip');
  images.push(image);
  // startWithPool spreads its options: an explicit undefined would hide its default set.
  const daemon = await startWithPool({ ...(opts.plugins ? { plugins: opts.plugins } : {}), ...(opts.env ? { env: opts.env } : {}) });
  daemons.push(daemon);
  const alias = opts.alias ?? 'bb';
  if (opts.importWith === 'lxc') {
    const imported = await lxc(daemon.socket, 'image', 'import', image.unified, '--alias', alias);
    if (imported.status !== 0) throw new Error(`image import failed: ${imported.stderr}`);
  } else {
    await importImage(daemon, image.unified, alias);
  }
  return Object.assign(daemon, { image });
}

/**
 * For `test.after.always`: kills the containers still running under the daemons startWithImage made,
 * stops every daemon (those a test started itself too), removes the images.
 */
export async function stopImageDaemons(): Promise<void> {
  for (const daemon of daemons.splice(0)) killContainers(daemon.dir);
  await stopDaemons();
  for (const image of images.splice(0)) rmSync(image.dir, { recursive: true, force: true });
}
