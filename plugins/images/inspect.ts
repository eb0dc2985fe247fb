/**
 * Checking an uploaded image before anything is stored: the formats, the tarball's members and
 * metadata.yaml. Every failure here is the client's (400).
 */
import { open } from 'node:fs/promises';
import { badRequest, type HostTools, type ImageMetadata } from '../../sdk/index.js';
import { detectFormat, type Compression, type FileFormat } from '../../sdk/lib/archive/index.js';
import { readDecompressed } from './decompress.js';
import type { ImageType } from './image.js';
import { parseMetadata } from './metadata.js';
import { ImageLayout, isRegularFile } from './layout.js';
import { TarWalker, type TarEntry } from '../../sdk/lib/archive/index.js';

export interface Inspected {
  metadata: ImageMetadata;
  type: ImageType;
  files: { metadata: FileFormat; rootfs?: FileFormat };
}

/** The superblock says how many bytes the filesystem uses (little-endian u64 at offset 40). */
async function squashfsTruncated(file: string): Promise<boolean> {
  const fh = await open(file, 'r');
  try {
    const sb = Buffer.alloc(48);
    await fh.read(sb, 0, sb.length, 0);
    return (await fh.stat()).size < Number(sb.readBigUInt64LE(40));
  } finally {
    await fh.close();
  }
}

async function tarFormat(file: string, what: string): Promise<Compression> {
  const format = await detectFormat(file);
  if (!format) throw badRequest(`Unsupported compression of the ${what}`);
  if (format.kind !== 'tar') throw badRequest(`The ${what} must be a tarball, not ${format.kind}`);
  return format.compression;
}

/** Walk a whole archive (checking it), collecting what `onEntry` asks for; returns the member count. */
async function walkArchive(tools: HostTools, file: string, compression: Compression, onEntry: (e: TarEntry) => boolean, onContent?: (e: TarEntry, content: Buffer) => void): Promise<number> {
  const walker = new TarWalker('image tarball', onEntry, onContent);
  await readDecompressed(tools, file, compression, (chunk) => walker.push(chunk));
  walker.finish();
  return walker.members;
}

/**
 * One walk of an image tarball's members: their layout and the content of metadata.yaml. Fed from
 * the file, or from the upload as it arrived (walk-as-received.ts).
 */
export class MetadataWalk {
  /** `compression`: what the walked bytes were inflated from. */
  constructor(readonly compression: Compression) {}
  readonly layout = new ImageLayout('image tarball');
  content: Buffer | undefined;
  readonly walker = new TarWalker('image tarball',
    (entry) => this.layout.see(entry) === 'metadata.yaml' && isRegularFile(entry) && this.content === undefined,
    (_entry, data) => (this.content ??= data));
}

/**
 * Read metadata.yaml (`metadata.yaml` or `./metadata.yaml`) while checking the archive and the
 * shape of its members; returns what the members say about the image's type. `walked`: the same
 * walk done already over the bytes of the file.
 */
async function metadataOf(tools: HostTools, file: string, compression: Compression, missing: string, walked?: MetadataWalk): Promise<{ metadata: ImageMetadata; layout: { container: boolean; virtualMachine: boolean } }> {
  let walk = walked;
  if (!walk) {
    const fresh = walk = new MetadataWalk(compression);
    await readDecompressed(tools, file, compression, (chunk) => fresh.walker.push(chunk));
    fresh.walker.finish();
  }
  const { layout, content } = walk;
  if (content === undefined) {
    // A metadata.yaml that is there but is no regular file says so through the layout check.
    layout.check(undefined);
    throw badRequest(`Invalid image tarball: ${missing}`);
  }
  const metadata = parseMetadata(content.toString('utf8'));
  return { metadata, layout: layout.check(metadata) };
}

/**
 * A unified tarball: metadata.yaml beside rootfs/ (container) or rootfs.img (virtual machine).
 * The whole archive is read once, so a truncated or corrupt upload is refused now rather than
 * at the first launch. `walked`: the tarball walked already as it arrived, so not read again.
 */
export async function inspectUnified(tools: HostTools, file: string, walked?: MetadataWalk): Promise<Inspected> {
  const compression = await tarFormat(file, 'image');
  const { metadata, layout } = await metadataOf(tools, file, compression, 'metadata.yaml is missing', walked?.compression === compression ? walked : undefined);
  if (layout.container && layout.virtualMachine) throw badRequest('Invalid image tarball: it has both rootfs/ and rootfs.img');
  const type: ImageType | undefined = layout.container ? 'container' : layout.virtualMachine ? 'virtual-machine' : undefined;
  if (type === undefined) throw badRequest('Invalid image tarball: it has neither rootfs/ nor rootfs.img (for a split image, upload the metadata and rootfs files together)');
  return { metadata, type, files: { metadata: { kind: 'tar', compression } } };
}

/** The metadata tarball of a split image. */
async function splitMetadata(tools: HostTools, file: string): Promise<{ metadata: ImageMetadata; compression: Compression }> {
  const compression = await tarFormat(file, 'metadata tarball');
  const { metadata } = await metadataOf(tools, file, compression, 'the metadata tarball is missing metadata.yaml');
  return { metadata, compression };
}

/** The rootfs of a split image: a tarball or squashfs (part `rootfs`), or a qcow2 disk (part `rootfs.img`). */
async function splitRootfs(tools: HostTools, file: string, part: 'rootfs' | 'rootfs.img'): Promise<FileFormat> {
  const format = await detectFormat(file);
  if (!format) throw badRequest('Unsupported compression of the rootfs');
  if (part === 'rootfs.img') {
    if (format.kind !== 'qcow2') throw badRequest('A virtual-machine rootfs (rootfs.img) must be a qcow2 disk image');
    return format;
  }
  switch (format.kind) {
    case 'qcow2':
      throw badRequest('A qcow2 disk image must be sent as the rootfs.img part (virtual-machine image)');
    case 'squashfs': {
      const check = await tools.run('unsquashfs', ['-s', file], { allowFailure: true });
      if (check.exitCode !== 0) throw badRequest('Invalid squashfs rootfs: it cannot be read');
      if (await squashfsTruncated(file)) throw badRequest('Invalid squashfs rootfs: the file is truncated');
      return format;
    }
    case 'tar':
      await walkArchive(tools, file, format.compression, () => false);
      return format;
  }
}

/** The split form: a metadata tarball and a rootfs file, checked side by side. */
export async function inspectSplit(tools: HostTools, metaFile: string, rootfsFile: string, rootfsPart: 'rootfs' | 'rootfs.img'): Promise<Inspected> {
  const [{ metadata, compression }, rootfs] = await Promise.all([splitMetadata(tools, metaFile), splitRootfs(tools, rootfsFile, rootfsPart)]);
  return {
    metadata,
    type: rootfsPart === 'rootfs.img' ? 'virtual-machine' : 'container',
    files: { metadata: { kind: 'tar', compression }, rootfs },
  };
}
