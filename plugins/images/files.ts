/**
 * Image files on disk: `<images dir>/<fingerprint>` (the unified tarball, or the metadata
 * tarball of a split image) and `<fingerprint>.rootfs` beside it for split images. Files are
 * per fingerprint, shared by the records of every project that holds the image. Uploads land
 * in a staging directory first and are renamed into place, so a file under its final name is
 * always whole. The images dir is `<dataDir>/images` or the volume `storage.images_volume` names,
 * asked for on every use (it moves when the key changes).
 */
import { randomUUID } from 'node:crypto';
import { chmod, mkdir, readdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { daemonStorageDir, type ServiceRegistry } from '../../sdk/index.js';

const STAGING = '.staging';
const ROOTFS_SUFFIX = '.rootfs';
const FINGERPRINT = /^[0-9a-f]{64}$/;

export class ImageFiles {
  constructor(private readonly ctx: { services: ServiceRegistry; dataDir: string }) {}

  get dir(): string {
    return daemonStorageDir(this.ctx, 'images');
  }

  get staging(): string {
    return path.join(this.dir, STAGING);
  }

  async init(): Promise<void> {
    await mkdir(this.staging, { recursive: true, mode: 0o700 });
    await chmod(this.dir, 0o700);
  }

  metadataFile(fingerprint: string): string {
    return path.join(this.dir, fingerprint);
  }

  rootfsFile(fingerprint: string): string {
    return path.join(this.dir, fingerprint + ROOTFS_SUFFIX);
  }

  /** A fresh private directory for one upload. */
  async stagingArea(): Promise<string> {
    const area = path.join(this.staging, randomUUID());
    await mkdir(area, { recursive: true, mode: 0o700 });
    return area;
  }

  /** Move staged files under their final names. */
  async install(fingerprint: string, metadata: string, rootfs?: string): Promise<void> {
    if (rootfs) await rename(rootfs, this.rootfsFile(fingerprint));
    await rename(metadata, this.metadataFile(fingerprint));
  }

  async remove(fingerprint: string): Promise<void> {
    await rm(this.metadataFile(fingerprint), { force: true });
    await rm(this.rootfsFile(fingerprint), { force: true });
  }

  /** Fingerprints that have files (metadata or rootfs). */
  async present(): Promise<Set<string>> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    const out = new Set<string>();
    for (const name of names) {
      const fp = name.endsWith(ROOTFS_SUFFIX) ? name.slice(0, -ROOTFS_SUFFIX.length) : name;
      if (FINGERPRINT.test(fp)) out.add(fp);
    }
    return out;
  }

  /** Uploads interrupted by a crash. */
  async clearStaging(): Promise<void> {
    await rm(this.staging, { recursive: true, force: true });
    await mkdir(this.staging, { recursive: true, mode: 0o700 });
  }
}
