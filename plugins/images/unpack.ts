/**
 * Unpacking an image for a storage volume: `dir/metadata.yaml`, `dir/templates/` and
 * `dir/rootfs/` (or `dir/root.img`, the raw disk, for a virtual-machine image). Ownership, modes and
 * extended attributes are kept as stored: the instance driver maps ids at mount time.
 * Progress counts the bytes of the image's files read, over both files of a split image, as the
 * tools that read them report or show it: no file passes through the daemon.
 */
import { chmod, lstat, mkdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { badRequest, BLOCK_IMAGE, notFound, type HostTools, type UnpackProgress } from '../../sdk/index.js';
import type { ImageFiles } from './files.js';
import type { StoredImage } from './image.js';
import { unsquash } from './unsquash.js';
import { extractTar } from './tarball.js';

const COPY_POLL_MS = 250;

export async function unpackImage(tools: HostTools, files: ImageFiles, image: StoredImage, dir: string, onProgress?: UnpackProgress): Promise<void> {
  const fp = image.fingerprint;
  const meta = image.files.metadata;
  if (meta.kind !== 'tar') throw notFound(`Image ${fp} has no readable metadata tarball`);
  const rootfs = image.files.rootfs;
  const progress = onProgress && await byteCounter(onProgress, [files.metadataFile(fp), ...(rootfs ? [files.rootfsFile(fp)] : [])]);
  await mkdir(dir, { recursive: true });
  await extractTar(tools, files.metadataFile(fp), meta.compression, dir, progress?.read);
  // Import refuses these shapes; an image stored before it did must still not have its rootfs
  // written, or its instance run, through a link out of the volume.
  await expectKind(fp, dir, 'rootfs', 'directory');
  await expectKind(fp, dir, 'rootfs.img', 'file');
  await expectKind(fp, dir, 'templates', 'directory');
  await expectKind(fp, dir, 'metadata.yaml', 'file');
  if (rootfs) {
    switch (rootfs.kind) {
      case 'tar': {
        const target = path.join(dir, 'rootfs');
        await mkdir(target, { recursive: true });
        await extractTar(tools, files.rootfsFile(fp), rootfs.compression, target, progress?.read);
        break;
      }
      case 'squashfs':
        await unsquash(tools, files.rootfsFile(fp), path.join(dir, 'rootfs'), progress?.read);
        break;
      case 'qcow2':
        await convertDisk(tools, files.rootfsFile(fp), path.join(dir, BLOCK_IMAGE), progress?.read);
        break;
    }
  }
  // A unified virtual-machine tarball brings its qcow2 disk inside the metadata tarball.
  const unified = path.join(dir, 'rootfs.img');
  if (!rootfs && await lstat(unified).then((st) => st.isFile(), () => false)) {
    await convertDisk(tools, unified, path.join(dir, BLOCK_IMAGE));
    await rm(unified, { force: true });
  }
  progress?.end();
}

/** Adds up bytes read over `paths` and tells `onProgress`; `end` reports the whole (what a tool did not count). */
async function byteCounter(onProgress: UnpackProgress, paths: string[]): Promise<{ read: (bytes: number) => void; end: () => void }> {
  const sizes = await Promise.all(paths.map((p) => stat(p).then((st) => st.size)));
  const total = sizes.reduce((a, b) => a + b, 0);
  let done = 0;
  return {
    read(bytes) {
      done = Math.min(total, done + bytes);
      onProgress(done, total);
    },
    end: () => onProgress(total, total),
  };
}

/**
 * A virtual-machine disk becomes the raw `root.img` VMs boot from, once per pool (qemu-img writes
 * it sparse): instances clone it and grow their copy. Its growing output shows the progress.
 */
async function convertDisk(tools: HostTools, from: string, to: string, onRead?: (bytes: number) => void): Promise<void> {
  // The disk holds the guest's data: root's alone, as the reference keeps it (copies keep the mode).
  const convert = async () => {
    await tools.run('qemu-img', ['convert', '-q', '-f', 'qcow2', '-O', 'raw', from, to], { timeoutMs: 30 * 60_000, endWithDaemon: true });
    await chmod(to, 0o600);
  };
  if (!onRead) return convert();
  let counted = 0;
  const timer = setInterval(() => {
    void stat(to).then((st) => {
      if (st.size > counted) {
        onRead(st.size - counted);
        counted = st.size;
      }
    }, () => {});
  }, COPY_POLL_MS);
  try {
    await convert();
  } finally {
    clearInterval(timer);
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
