/**
 * Unpacking an image for a storage volume: `dir/metadata.yaml`, `dir/templates/` and
 * `dir/rootfs/` (or `dir/rootfs.img` for a virtual-machine image). Ownership, modes and
 * extended attributes are kept as stored: the instance driver maps ids at mount time.
 */
import { copyFile, lstat, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { badRequest, notFound, type HostTools } from '../../sdk/index.js';
import type { ImageFiles } from './files.js';
import type { StoredImage } from './image.js';
import { extractTar, TAR_TIMEOUT_MS } from './tarball.js';

export async function unpackImage(tools: HostTools, files: ImageFiles, image: StoredImage, dir: string): Promise<void> {
  const fp = image.fingerprint;
  const meta = image.files.metadata;
  if (meta.kind !== 'tar') throw notFound(`Image ${fp} has no readable metadata tarball`);
  await mkdir(dir, { recursive: true });
  await extractTar(tools, files.metadataFile(fp), meta.compression, dir);
  // Import refuses these shapes; an image stored before it did must still not have its rootfs
  // written, or its instance run, through a link out of the volume.
  await expectKind(fp, dir, 'rootfs', 'directory');
  await expectKind(fp, dir, 'rootfs.img', 'file');
  await expectKind(fp, dir, 'templates', 'directory');
  await expectKind(fp, dir, 'metadata.yaml', 'file');
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

/** `dir/name`, when present, must be a real directory or regular file (never a link). */
async function expectKind(fingerprint: string, dir: string, name: string, kind: 'directory' | 'file'): Promise<void> {
  const st = await lstat(path.join(dir, name)).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
  if (st && !(kind === 'directory' ? st.isDirectory() : st.isFile())) {
    throw badRequest(`Image ${fingerprint} cannot be used: its "${name}" is not a ${kind === 'directory' ? 'directory' : 'regular file'}`);
  }
}
