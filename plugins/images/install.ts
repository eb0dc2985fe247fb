/**
 * Putting a checked image in place: its files under their final names, then the record and its
 * aliases in one transaction, undoing the files if that fails. Shared by uploads and publishing.
 */
import { stat } from 'node:fs/promises';
import { conflict, type ApiRequest, type KeyedLock, type Operation, type OperationControl, type PluginContext } from '../../sdk/index.js';
import type { ImageCatalog } from './catalog.js';
import type { ImageFiles } from './files.js';
import { aliasUrl, imageUrl, type StoredAlias, type StoredImage } from './image.js';
import { imageLifecycle, type ImageOrigin } from './lifecycle.js';

const exists = (file: string) => stat(file).then(() => true, () => false);

export interface NewAlias {
  name: string;
  description: string;
}

/** Files waiting in a staging area. */
export interface StagedFiles {
  metadataFile: string;
  rootfsFile?: string;
}

export class ImageInstaller {
  constructor(
    private readonly ctx: PluginContext,
    private readonly catalog: ImageCatalog,
    private readonly files: ImageFiles,
    private readonly lock: KeyedLock,
    /** Told when an image's files were put in place here for the first time (cluster replication). */
    private readonly installed: (image: StoredImage) => void = () => {},
  ) {}

  /**
   * The task an install runs in, named as the reference's clients expect; `cleanup` (the staging
   * area, the opened source) runs however the task ends.
   */
  operation(
    req: ApiRequest, run: (op: OperationControl) => Promise<Record<string, unknown>>, cleanup: () => Promise<void>, metadata?: Record<string, unknown>,
  ): Operation {
    return this.ctx.operations.create({
      class: 'task',
      description: 'Downloading image',
      request: req,
      ...(metadata ? { metadata } : {}),
      run: async (op) => {
        try {
          return await run(op);
        } finally {
          await cleanup();
        }
      },
    });
  }

  /**
   * Install and announce the image; answers the operation result `{fingerprint, size}`.
   * `duplicate` is the error when the project already holds the fingerprint.
   */
  async install(req: ImageOrigin, op: OperationControl, staged: StagedFiles, image: StoredImage, aliases: NewAlias[], duplicate: string, project = req.project): Promise<{ fingerprint: string; size: string }> {
    const fp = image.fingerprint;
    const result = { fingerprint: fp, size: String(image.size) };
    // As the reference does, the result is shown even when the image turns out to be a duplicate.
    op.updateMetadata(result);
    await this.lock.run(fp, async () => {
      if (await this.catalog.images.get(project, fp)) throw new Error(duplicate);
      // Another project may hold the same image: its files are already in place.
      const filesExisted = await exists(this.files.metadataFile(fp));
      try {
        if (!filesExisted) await this.files.install(fp, staged.metadataFile, staged.rootfsFile);
        await this.catalog.store.transaction(async (tx) => {
          await tx.collection<StoredImage>('images').put(project, fp, image, 0);
          for (const alias of aliases) {
            await tx.collection<StoredAlias>('aliases').put(project, alias.name, { name: alias.name, description: alias.description, target: fp }, 0);
          }
        });
      } catch (err) {
        if (!filesExisted && !(await this.catalog.fingerprintInUse(fp))) await this.files.remove(fp);
        throw err;
      }
      if (!filesExisted) this.installed(image);
    });
    const events = this.ctx.events;
    imageLifecycle(events, req, 'image-created', (named) => imageUrl(named, fp), { type: image.type });
    for (const alias of aliases) imageLifecycle(events, req, 'image-alias-created', (named) => aliasUrl(named, alias.name), { target: fp });
    return result;
  }

  /** 409 before any work when an alias is taken (or named twice). */
  async checkAliasesFree(project: string, aliases: NewAlias[]): Promise<void> {
    const seen = new Set<string>();
    for (const alias of aliases) {
      if (seen.has(alias.name) || await this.catalog.aliases.get(project, alias.name)) throw conflict(`Alias "${alias.name}" already exists`);
      seen.add(alias.name);
    }
  }
}
