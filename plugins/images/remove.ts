/**
 * Removing an image from a project: its aliases and record in one transaction, and, when no other
 * project holds the same fingerprint, its unpacked copies on pools and its files. Shared by
 * DELETE /1.0/images/<fp> and a refresh that replaced the image.
 */
import { StorageServiceRef, type KeyedLock, type PluginContext } from '../../sdk/index.js';
import type { ImageCatalog } from './catalog.js';
import type { ImageFiles } from './files.js';
import type { StoredAlias, StoredImage } from './image.js';

export async function removeImage(ctx: PluginContext, catalog: ImageCatalog, files: ImageFiles, lock: KeyedLock, project: string, fp: string): Promise<void> {
  await lock.run(fp, async () => {
    await catalog.find(project, fp);
    const shared = (await catalog.images.list()).some((r) => r.name === fp && r.project !== project);
    // Unpacked copies on pools go first: they are caches, made again from the files if needed.
    if (!shared) await ctx.services.get(StorageServiceRef)?.deleteImageVolumes(fp);
    await catalog.store.transaction(async (tx) => {
      const aliases = tx.collection<StoredAlias>('aliases');
      for (const a of await aliases.list(project)) if (a.doc.target === fp) await aliases.delete(project, a.name);
      await tx.collection<StoredImage>('images').delete(project, fp);
    });
    if (!shared) await files.remove(fp);
  });
}
