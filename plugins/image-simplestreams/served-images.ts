/**
 * The images a simplestreams reader may see: the public ones of the `default` project. Other projects
 * are not served: a reader is anonymous and names no project, and a project's images are its own.
 * A private image, or one deleted while the index is built, is never listed nor served.
 */
import { ApiError, type ImagesService, type StoredImageFiles } from '../../sdk/index.js';
import type { ServedImage } from './catalog.js';
import type { FileHashes } from './file-hashes.js';

export const SERVED_PROJECT = 'default';

/** The image's files, or undefined when it went away meanwhile. */
async function filesOf(images: ImagesService, fingerprint: string): Promise<StoredImageFiles | undefined> {
  try {
    return await images.files(fingerprint);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return undefined;
    throw err;
  }
}

export async function servedImages(images: ImagesService, hashes: FileHashes): Promise<ServedImage[]> {
  const records = (await images.list(SERVED_PROJECT)).filter((record) => record.public);
  const served = await Promise.all(records.map(async (record): Promise<ServedImage | undefined> => {
    const fp = record.fingerprint;
    const files = await filesOf(images, fp);
    if (!files) return undefined;
    if (!files.rootfs) return { record, files, sums: { metadata: fp } };
    try {
      const [metadata, rootfs] = await Promise.all([
        hashes.sha256(`${fp}:metadata`, files.metadata.path),
        hashes.sha256(`${fp}:rootfs`, files.rootfs.path),
      ]);
      return { record, files, sums: { metadata, rootfs } };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }));
  const out = served.filter((image): image is ServedImage => !!image)
    .sort((a, b) => (a.record.fingerprint < b.record.fingerprint ? -1 : 1));
  hashes.keepOnly(new Set(out.map((image) => image.record.fingerprint)));
  return out;
}

/** One public image of the served project by full fingerprint, or undefined. */
export async function servedImage(images: ImagesService, fingerprint: string): Promise<{ files: StoredImageFiles } | undefined> {
  const record = (await images.list(SERVED_PROJECT)).find((r) => r.fingerprint === fingerprint);
  if (!record?.public) return undefined;
  const files = await filesOf(images, fingerprint);
  return files && { files };
}
