/** /1.0/images, /1.0/images/{fingerprint} and its /export. */
import Joi from 'joi';
import {
  async, badRequest, collection, notFound, empty, sync,
  type ApiRequest, type KeyedLock, type PluginContext, type RouteDescriptor,
} from '../../../sdk/index.js';
import type { ImageCatalog } from '../catalog.js';
import type { ImageCreator } from '../create.js';
import { exportResponse } from '../export.js';
import type { ClusterImageFiles } from '../cluster-files.js';
import { exportPostBody, pushExport, type ExportPost } from '../push-export.js';
import type { ImageFiles } from '../files.js';
import { editableOf, imageUrl, imageView, type StoredImage } from '../image.js';
import type { ImageSecrets } from '../image-secrets.js';
import type { ImageRefresher } from '../refresh.js';
import { imageLifecycle } from '../lifecycle.js';
import { removeImage } from '../remove.js';
import { seesPrivateImages } from '../visibility.js';
import { imageProfiles } from '../profiles.js';
import { parseClientTime } from '../times.js';

/** Uploads are streamed to disk; images of several GB are normal. */
const MAX_UPLOAD_BYTES = 1024 ** 4;

const editShape = Joi.object({
  auto_update: Joi.boolean(),
  public: Joi.boolean(),
  properties: Joi.object().pattern(Joi.string(), Joi.string().allow('')).allow(null),
  expires_at: Joi.string().allow('', null),
  profiles: Joi.array().items(Joi.string()).allow(null),
}).unknown(true).required();

export interface ImageRouteDeps {
  ctx: PluginContext;
  catalog: ImageCatalog;
  files: ImageFiles;
  creator: ImageCreator;
  lock: KeyedLock;
  secrets: ImageSecrets;
  refresher: ImageRefresher;
  clusterFiles: ClusterImageFiles;
}

export function imageRoutes({ ctx, catalog, files, creator, lock, secrets, refresher, clusterFiles }: ImageRouteDeps): RouteDescriptor[] {
  const find = (req: ApiRequest) => catalog.find(req.project, req.params.fingerprint!);
  /**
   * What an untrusted client may see: public images, and a private one whose secret it gives (the
   * download spends it). Anything else is "not found", so nothing tells a private image exists.
   */
  const findFor = async (req: ApiRequest, use = false) => {
    const found = await find(req);
    if (seesPrivateImages(req) || found.doc.public || secrets.check(req.query.secret, found.project, found.name, use)) return found;
    throw notFound('Image not found');
  };

  return [
    {
      path: '/1.0/images',
      extension: 'image_types',
      get: {
        description: 'List the images of a project',
        conventions: ['recursion', 'filter'],
        // Records only (images and aliases).
        reuse: true,
        // Untrusted clients (`lxc remote add --public`), and a restricted caller outside its projects,
        // see what anyone may: the public images (maybe none).
        access: 'untrusted',
        handler: async (req) => {
          const project = req.project;
          const [all, aliases] = await Promise.all([catalog.images.list(project), catalog.aliasesByTarget(project)]);
          const records = seesPrivateImages(req) ? all : all.filter((r) => r.doc.public);
          return collection(records, (r) => imageUrl(project, r.name), (r) => imageView(r.doc, aliases.get(r.name) ?? []));
        },
      },
      post: {
        description: 'Import an image (unified or split upload), publish an instance or snapshot, or get a push token',
        rawBody: true,
        answers: ['operation'],
        // 403: an untrusted caller without a pending push secret; 404: the instance or snapshot to publish does not exist.
        errors: [403, 404],
        maxBytes: MAX_UPLOAD_BYTES,
        // A pushing daemon holds only the secret of a pending push: the creator checks callers itself.
        access: 'untrusted',
        handler: (req) => creator.post(req),
      },
    },
    {
      path: '/1.0/images/{fingerprint}',
      extension: 'images_expiry',
      current: async (req) => editableOf((await find(req)).doc),
      get: {
        description: 'Show an image',
        // Untrusted clients see public images, or a private one with its secret.
        access: 'untrusted',
        handler: async (req) => {
          const { doc } = await findFor(req);
          return sync(imageView(doc, await catalog.aliasesOf(req.project, doc.fingerprint)), { etag: editableOf(doc) });
        },
      },
      put: {
        description: 'Replace the editable fields of an image',
        body: editShape,
        handler: async (req) => {
          const found = await find(req);
          const body = req.body as Record<string, any>;
          let expires: string | undefined;
          try {
            expires = parseClientTime(body.expires_at);
          } catch (err) {
            throw badRequest(`Invalid "expires_at": ${(err as Error).message}`);
          }
          // An absent date keeps its value, as the reference does; the rest is replaced.
          const profiles = await imageProfiles(ctx.services, req.project, body.profiles);
          const next: StoredImage = {
            ...found.doc,
            auto_update: body.auto_update ?? false,
            public: body.public ?? false,
            properties: body.properties ?? {},
            expires_at: expires ?? found.doc.expires_at,
            profiles,
          };
          await catalog.images.put(found.project, found.name, next, found.rev);
          imageLifecycle(ctx.events, req, 'image-updated', (project) => imageUrl(project, found.name));
          return empty();
        },
      },
      delete: {
        description: 'Delete an image',
        answers: ['operation'],
        handler: async (req) => {
          const project = req.project;
          const fp = (await find(req)).name;
          const url = imageUrl(project, fp);
          const op = ctx.operations.create({
            class: 'task',
            description: 'Deleting image',
            request: req,
            resources: { images: [url] },
            run: async () => {
              await removeImage(ctx, catalog, files, lock, project, fp);
              imageLifecycle(ctx.events, req, 'image-deleted', (named) => imageUrl(named, fp));
            },
          });
          return async(op);
        },
      },
    },
    {
      path: '/1.0/images/{fingerprint}/export',
      get: {
        description: 'Download the image files',
        answers: ['raw'],
        access: 'untrusted',
        handler: async (req) => {
          const { doc } = await findFor(req, true);
          await clusterFiles.ensureLocal(doc);
          const response = exportResponse(doc, files);
          imageLifecycle(ctx.events, req, 'image-retrieved', (project) => imageUrl(project, doc.fingerprint));
          return response;
        },
      },
      post: {
        description: 'Push the image to another daemon, with a secret that daemon handed out',
        answers: ['operation'],
        errors: [404],
        body: exportPostBody,
        handler: async (req) => {
          const { doc } = await find(req);
          const body = req.body as Partial<ExportPost>;
          const request: ExportPost = {
            target: body.target!, certificate: body.certificate ?? '', secret: body.secret ?? '', project: body.project ?? '', profiles: body.profiles ?? null,
          };
          return async(pushExport({ operations: ctx.operations, events: ctx.events, files }, req, doc, request));
        },
      },
    },
    {
      path: '/1.0/images/{fingerprint}/refresh',
      extension: 'image_force_refresh',
      post: {
        description: 'Fetch the newer image the server it came from has under its alias, in its place',
        answers: ['operation'],
        handler: (req) => refresher.post(req),
      },
    },
    {
      path: '/1.0/images/{fingerprint}/secret',
      post: {
        description: 'Make a secret that lets an untrusted client download this image once',
        answers: ['operation'],
        handler: async (req) => {
          const found = await find(req);
          return async(secrets.create(req, found.project, found.name));
        },
      },
    },
  ];
}
