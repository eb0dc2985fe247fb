/**
 * Replacing an image by the newer one the server it came from has under its alias: asked for
 * (POST /1.0/images/<fp>/refresh, `lxc image refresh`) or by the auto-update task. The newer image
 * is fetched with the old one's settings (public, auto_update, cached, profiles, last use), the
 * aliases move over and the old image goes, as the reference does. The operation's `refreshed`
 * tells lxc which of its two lines to print.
 */
import { async, badRequest, type ApiRequest, type ApiResponse, type KeyedLock, type OperationControl, type PluginContext } from '../../sdk/index.js';
import type { ImageCatalog } from './catalog.js';
import type { ImageFiles } from './files.js';
import { imageUrl, type StoredAlias, type StoredImage } from './image.js';
import type { ImageOrigin } from './lifecycle.js';
import type { ImagePuller } from './pull.js';
import { RemoteError } from './remote-daemon.js';
import type { RemoteImageSource } from './remote-source.js';
import { removeImage } from './remove.js';

/** Whether an image names a source it can be refreshed from. */
export const refreshable = (image: StoredImage): boolean => image.update_source?.protocol === 'lxd';

export class ImageRefresher {
  constructor(
    private readonly ctx: PluginContext,
    private readonly catalog: ImageCatalog,
    private readonly files: ImageFiles,
    private readonly lock: KeyedLock,
    private readonly puller: ImagePuller,
  ) {}

  async post(req: ApiRequest): Promise<ApiResponse> {
    const project = req.project;
    const { doc } = await this.catalog.find(project, req.params.fingerprint!);
    if (!refreshable(doc)) throw badRequest('This image has no source to refresh from: it was not copied from another server by alias');
    return async(this.ctx.operations.create({
      class: 'task',
      description: 'Updating image',
      request: req,
      resources: { images: [imageUrl(project, doc.fingerprint)] },
      mayCancel: true,
      run: async (op) => ({ refreshed: await this.refresh(req, project, doc, op) }),
    }));
  }

  /** Refresh one image of a project; answers whether a newer image took its place. */
  async refresh(origin: ImageOrigin, project: string, doc: StoredImage, op: OperationControl): Promise<boolean> {
    const from = doc.update_source!;
    const source: RemoteImageSource = {
      server: from.server, certificate: from.certificate || undefined, name: from.alias, updateAlias: from.alias, imageType: from.image_type || undefined,
    };
    const old = doc.fingerprint;
    let current: string;
    try {
      current = (await this.puller.lookup(await this.puller.connect(source, op.signal), source)).fingerprint;
    } catch (err) {
      if (err instanceof RemoteError) throw badRequest(`Failed to refresh the image: ${err.message}`);
      throw err;
    }
    if (current === old) return false;
    const fresh = { ...source, name: current };
    await this.puller.pull(origin, project, fresh, {
      aliases: [], public: doc.public, auto_update: doc.auto_update, cached: doc.cached ?? false, profiles: doc.profiles, last_used_at: doc.last_used_at,
    }, op);
    await this.catalog.store.transaction(async (tx) => {
      const aliases = tx.collection<StoredAlias>('aliases');
      for (const a of await aliases.list(project)) {
        if (a.doc.target === old) await aliases.put(project, a.name, { ...a.doc, target: current }, a.rev);
      }
    });
    await removeImage(this.ctx, this.catalog, this.files, this.lock, project, old);
    return true;
  }
}
