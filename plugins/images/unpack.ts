/**
 * Unpacking an image for a storage volume: `dir/metadata.yaml`, `dir/templates/` and
 * `dir/rootfs/` (or `dir/rootfs.img` for a virtual-machine image). Ownership, modes and
 * extended attributes are kept as stored: the instance driver maps ids at mount time.
 */
import { copyFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { notFound, type HostTools } from '../../sdk/index.js';
import type { ImageFiles } from './files.js';
import type { StoredImage } from './image.js';
import { extractTar, TAR_TIMEOUT_MS } from './tarball.js';

export async function unpackImage(tools: HostTools, files: ImageFiles, image: StoredImage, dir: string): Promise<void> {
  const fp = image.fingerprint;
  const meta = image.files.metadata;
  if (meta.kind !== 'tar') throw notFound(`Image ${fp} has no readable metadata tarball`);
  await mkdir(dir, { recursive: true });
  await extractTar(tools, files.metadataFile(fp), meta.compression, dir);
  const rootfs = image.files.rootfs;
  if (!rootfs) return;
  switch (rootfs.kind) {
    case 'tar': {
      const target = path.join(dir, 'rootfs');
      await mkdir(target, { recursive: true });
      await extractTar(tools, files.rootfsFile(fp), rootfs.compression, target);
      return;
    }
    case 'squashfs':
      // -f: the target may exist (created empty by the volume); xattrs are extracted by default.
      await tools.run('unsquashfs', ['-f', '-n', '-q', '-d', path.join(dir, 'rootfs'), files.rootfsFile(fp)], { timeoutMs: TAR_TIMEOUT_MS, endWithDaemon: true });
      return;
    case 'qcow2':
      await copyFile(files.rootfsFile(fp), path.join(dir, 'rootfs.img'));
      return;
  }
}
