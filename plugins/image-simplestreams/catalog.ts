/**
 * The simplestreams view of the public images of the `default` project: `streams/v1/index.json`
 * points at one products file, `streams/v1/images.json`, with one product per image. Its version
 * is named from the image's creation date (clients date images by the first 8 characters) and its
 * items are the stored files as they are: a unified tarball as `lxd_combined.tar.gz`, a split
 * image as `lxd.tar.xz` (the metadata, carrying the image fingerprint in its `combined_*` sums) and
 * its rootfs (`root.squashfs`, `root.tar.xz` or `disk-kvm.img`). Item types name the role of a
 * file, not its compression: clients tell the compression from the bytes.
 */
import type { ImageRecord, StoredImageFile, StoredImageFiles } from '../../sdk/index.js';

export const PRODUCTS_PATH = 'streams/v1/images.json';

/** A file a product item points at: `images/<fingerprint>/<name>`. */
export interface ServedFile {
  fingerprint: string;
  name: string;
  role: 'metadata' | 'rootfs';
}

export const filePath = (file: ServedFile): string => `images/${file.fingerprint}/${file.name}`;

/** The names an image's files are served under. */
export function servedNames(files: StoredImageFiles): ServedFile['name'][] {
  if (!files.rootfs) return [`lxd_combined${files.metadata.extension}`];
  return [`lxd${files.metadata.extension}`, `root${files.rootfs.extension}`];
}

/** What a simplestreams item calls a rootfs, and which combined sum carries the fingerprint for it. */
const ROOTFS_ITEM: Record<StoredImageFile['kind'], { item: string; ftype: string; combined: string }> = {
  squashfs: { item: 'root.squashfs', ftype: 'squashfs', combined: 'combined_squashfs_sha256' },
  tarball: { item: 'root.tar.xz', ftype: 'root.tar.xz', combined: 'combined_rootxz_sha256' },
  qcow2: { item: 'disk-kvm.img', ftype: 'disk-kvm.img', combined: 'combined_disk-kvm-img_sha256' },
};

export interface ServedImage {
  record: ImageRecord;
  files: StoredImageFiles;
  /** sha256 of each file of a split image (the unified tarball's is the fingerprint). */
  sums: { metadata: string; rootfs?: string };
}

/** `20261126_04:58` from an API time: the 8-digit date first, as clients parse it. */
export function versionName(record: ImageRecord): string {
  const when = [record.created_at, record.uploaded_at].map((t) => new Date(t)).find((d) => !Number.isNaN(d.getTime()) && d.getTime() > 0) ?? new Date(0);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${when.getUTCFullYear()}${pad(when.getUTCMonth() + 1)}${pad(when.getUTCDate())}_${pad(when.getUTCHours())}:${pad(when.getUTCMinutes())}`;
}

function items(image: ServedImage): Record<string, Record<string, unknown>> {
  const fp = image.record.fingerprint;
  const [metaName, rootName] = servedNames(image.files);
  const metadata = image.files.metadata;
  if (!image.files.rootfs) {
    return {
      'lxd_combined.tar.gz': { ftype: 'lxd_combined.tar.gz', path: filePath({ fingerprint: fp, name: metaName!, role: 'metadata' }), sha256: fp, size: metadata.size },
    };
  }
  const rootfs = ROOTFS_ITEM[image.files.rootfs.kind];
  return {
    'lxd.tar.xz': {
      ftype: 'lxd.tar.xz',
      path: filePath({ fingerprint: fp, name: metaName!, role: 'metadata' }),
      sha256: image.sums.metadata,
      size: metadata.size,
      combined_sha256: fp,
      [rootfs.combined]: fp,
    },
    [rootfs.item]: {
      ftype: rootfs.ftype,
      path: filePath({ fingerprint: fp, name: rootName!, role: 'rootfs' }),
      sha256: image.sums.rootfs,
      size: image.files.rootfs.size,
    },
  };
}

function product(image: ServedImage) {
  const { record } = image;
  const props = record.properties;
  return {
    // Every alias of the image; clients add `<alias>/<arch>` themselves.
    aliases: record.aliases.map((a) => a.name).join(','),
    arch: record.architecture,
    os: props.os ?? '',
    release: props.release ?? '',
    release_title: props.version ?? props.release ?? '',
    ...(props.version ? { version: props.version } : {}),
    ...(props.variant ? { variant: props.variant } : {}),
    versions: { [versionName(record)]: { items: items(image) } },
  };
}

export function productsDocument(images: ServedImage[], updated: Date) {
  return {
    content_id: 'images',
    datatype: 'image-downloads',
    format: 'products:1.0',
    // Keyed by fingerprint: one image per product, so each keeps its own aliases.
    products: Object.fromEntries(images.map((image) => [image.record.fingerprint, product(image)])),
    updated: updated.toUTCString(),
  };
}

export function indexDocument(images: ServedImage[], updated: Date) {
  return {
    format: 'index:1.0',
    index: {
      images: {
        datatype: 'image-downloads',
        path: PRODUCTS_PATH,
        format: 'products:1.0',
        products: images.map((image) => image.record.fingerprint),
        updated: updated.toUTCString(),
      },
    },
    updated: updated.toUTCString(),
  };
}
