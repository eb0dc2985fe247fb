/**
 * POST /1.0/images/<fp>/refresh (`lxc image refresh`): ask the server an image came from what its
 * alias names now; when that is another image, fetch it with the same settings, move the aliases
 * over and remove the old one. The operation's `refreshed` tells lxc which of its two lines to print.
 */
import { async, badRequest, type ApiRequest, type ApiResponse, type KeyedLock, type PluginContext } from '../../sdk/index.js';
import type { ImageCatalog } from './catalog.js';
import type { ImageFiles } from './files.js';
import { imageUrl, type StoredAlias } from './image.js';
import type { ImagePuller } from './pull.js';
import { RemoteError } from './remote-daemon.js';
import type { RemoteImageSource } from './remote-source.js';
import { removeImage } from './remove.js';

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
    const from = doc.update_source;
    if (!from || from.protocol !== 'lxd') throw badRequest('This image has no source to refresh from: it was not copied from another server by alias');
    const source: RemoteImageSource = {
      server: from.server, certificate: from.certificate || undefined, name: from.alias, updateAlias: from.alias, imageType: from.image_type || undefined,
    };
    const old = doc.fingerprint;
    return async(this.ctx.operations.create({
      class: 'task',
      description: 'Updating image',
      request: req,
      resources: { images: [imageUrl(project, old)] },
      mayCancel: true,
      run: async (op) => {
        let current: string;
        try {
          current = (await this.puller.lookup(await this.puller.connect(source, op.signal), source)).fingerprint;
        } catch (err) {
          if (err instanceof RemoteError) throw badRequest(`Failed to refresh the image: ${err.message}`);
          throw err;
        }
        if (current === old) return { refreshed: false };
        const fresh = { ...source, name: current };
        await this.puller.pull(req, project, fresh, { aliases: [], public: doc.public, auto_update: doc.auto_update, cached: doc.cached ?? false, profiles: doc.profiles }, op);
        await this.catalog.store.transaction(async (tx) => {
          const aliases = tx.collection<StoredAlias>('aliases');
          for (const a of await aliases.list(project)) {
            if (a.doc.target === old) await aliases.put(project, a.name, { ...a.doc, target: current }, a.rev);
          }
        });
        await removeImage(this.ctx, this.catalog, this.files, this.lock, project, old);
        return { refreshed: true };
      },
    }));
  }
}
