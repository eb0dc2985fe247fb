/**
 * The images plugin: local images (upload, publish, aliases, export) under /1.0/images, and the
 * ImagesService the instances family unpacks images through and registers image sources with.
 */
import { daemonStorageAvailable, definePlugin, featureProjectOf, featureScopedRoute, ImagesServiceRef, KeyedLock, type PluginContext } from '../../sdk/index.js';
import { ImageCatalog } from './catalog.js';
import { ImageCreator } from './create.js';
import { ImageFiles } from './files.js';
import { ImageSecrets } from './image-secrets.js';
import { ImageInstaller } from './install.js';
import { autoUpdateCached, IMAGE_KEYS } from './keys.js';
import { cleanupLeftovers } from './leftovers.js';
import { ImagePublisher } from './publish.js';
import { ImagePuller } from './pull.js';
import { PushTokens } from './push-tokens.js';
import { ImageRefresher } from './refresh.js';
import { ImageTasks } from './tasks.js';
import { UrlImageFetcher } from './url-source.js';
import { aliasRoutes } from './routes/aliases.js';
import { imageRoutes } from './routes/images.js';
import { createImagesService } from './service.js';
import { ClusterImageFiles } from './cluster-files.js';
import { ImageReplicaPass } from './replica-pass.js';
import { ImageSources } from './sources.js';

/** Per daemon (a test process may run several): what boot needs from register. */
const state = new WeakMap<PluginContext, { catalog: ImageCatalog; files: ImageFiles }>();

export default definePlugin({
  register(ctx) {
    const catalog = new ImageCatalog(ctx.store);
    const files = new ImageFiles(ctx);
    const clusterFiles = new ClusterImageFiles(ctx, catalog, files);
    const lock = new KeyedLock();
    const sources = new ImageSources();
    const installer = new ImageInstaller(ctx, catalog, files, lock, (image) => clusterFiles.replicate(image));
    const publisher = new ImagePublisher(ctx, files, installer, sources);
    const puller = new ImagePuller(ctx, catalog, files, installer);
    const creator = new ImageCreator(ctx, files, new PushTokens(ctx.operations), installer, publisher, puller, new UrlImageFetcher(ctx, catalog, puller));
    const refresher = new ImageRefresher(ctx, catalog, files, lock, puller);
    const tasks = new ImageTasks(ctx, catalog, files, lock, refresher);
    const replicaPass = new ImageReplicaPass(ctx, catalog, files, clusterFiles);
    state.set(ctx, { catalog, files });
    // The schedule starts once every plugin has booted (its passes remove pool volumes), as the reference starts its tasks after start-up.
    ctx.hooks.ready.tap(async () => {
      if (!daemonStorageAvailable(ctx, 'images')) return;
      tasks.start();
      replicaPass.start();
    });
    ctx.hooks.shutdown.tap(async () => {
      await replicaPass.stop();
      await tasks.stop();
    });
    for (const key of IMAGE_KEYS) ctx.keys.register(key);
    const imageProject = (project: string) => featureProjectOf(ctx.services, project, 'images');
    ctx.services.provide(ImagesServiceRef, createImagesService(catalog, files, ctx.hostTools, sources, imageProject, puller, (project) => autoUpdateCached(ctx, project), clusterFiles));
    for (const route of clusterFiles.routes()) ctx.routes.add(route);
    // A project without its own images (features.images=false) sees and adds to those of `default`.
    for (const route of [...imageRoutes({ ctx, catalog, files, creator, lock, secrets: new ImageSecrets(ctx.operations), refresher, clusterFiles }), ...aliasRoutes(ctx, catalog)]) {
      ctx.routes.add(featureScopedRoute(ctx.services, 'images', route));
    }
  },

  async boot(ctx) {
    const { catalog, files } = state.get(ctx)!;
    // The volume holding image files is unavailable (the storage family raised a warning): leave them alone.
    if (!daemonStorageAvailable(ctx, 'images')) return;
    await files.init();
    await cleanupLeftovers(ctx, catalog, files);
  },
});
