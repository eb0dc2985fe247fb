/**
 * After a crash: uploads that were still in staging are dropped, and files without a record in
 * any project are removed (installs write files before the record, deletes remove the record first).
 */
import type { PluginContext } from '../../sdk/index.js';
import type { ImageCatalog } from './catalog.js';
import type { ImageFiles } from './files.js';

export async function cleanupLeftovers(ctx: PluginContext, catalog: ImageCatalog, files: ImageFiles): Promise<void> {
  await files.clearStaging();
  const recorded = new Set((await catalog.images.list()).map((r) => r.name));
  const present = await files.present();
  for (const fp of present) {
    if (recorded.has(fp)) continue;
    ctx.log.warn({ fingerprint: fp }, 'removing image files that have no record (left by a crash)');
    await files.remove(fp);
  }
  for (const fp of recorded) {
    if (!present.has(fp)) ctx.log.error({ fingerprint: fp }, 'image record without files: the image cannot be used until it is imported again');
  }
}
