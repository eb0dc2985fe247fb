/** /1.0/images/aliases and /1.0/images/aliases/{name}. */
import {
  badRequest, bodyShape, collection, conflict, empty, objectBody, renameBody, sync,
  type ApiRequest, type PluginContext, type RouteDescriptor,
} from '../../../sdk/index.js';
import type { ImageCatalog } from '../catalog.js';
import { aliasUrl, aliasView, type ImageType, type StoredAlias } from '../image.js';
import { imageLifecycle } from '../lifecycle.js';
import { checkAliasName } from '../names.js';

const bodyOf = (req: ApiRequest): Record<string, unknown> => {
  const body = req.body ?? {};
  if (typeof body !== 'object' || Array.isArray(body)) throw badRequest('The request body must be a JSON object');
  return body as Record<string, unknown>;
};

function description(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value !== 'string') throw badRequest('"description" must be a string');
  return value;
}

const editable = (a: StoredAlias) => ({ description: a.description, target: a.target });

export function aliasRoutes(ctx: PluginContext, catalog: ImageCatalog): RouteDescriptor[] {
  const typeOf = async (project: string, fp: string): Promise<ImageType | undefined> => (await catalog.images.get(project, fp))?.doc.type;

  /** The full fingerprint an alias may point at (a unique prefix is accepted); 404 when no image matches. */
  const target = async (project: string, value: unknown): Promise<string> => {
    if (typeof value !== 'string' || value === '') throw badRequest('The target field is required');
    return (await catalog.find(project, value)).name;
  };

  const lifecycle = (req: ApiRequest, action: string, name: string, context?: Record<string, unknown>) =>
    imageLifecycle(ctx.events, req, action, (project) => aliasUrl(project, name), context);

  return [
    {
      path: '/1.0/images/aliases',
      extension: 'image_create_aliases',
      get: {
        description: 'List the image aliases of a project',
        conventions: ['recursion', 'filter'],
        handler: async (req) => {
          const project = req.project;
          const [aliases, images] = await Promise.all([catalog.aliases.list(project), catalog.images.list(project)]);
          const types = new Map(images.map((r) => [r.name, r.doc.type]));
          return collection(aliases, (a) => aliasUrl(project, a.name), (a) => aliasView(a.doc, types.get(a.doc.target)));
        },
      },
      post: {
        description: 'Create an image alias',
        errors: [409],
        body: objectBody({ name: bodyShape.text, description: bodyShape.text, target: bodyShape.text }),
        handler: async (req) => {
          const body = bodyOf(req);
          const name = checkAliasName(body.name);
          const alias: StoredAlias = { name, description: description(body.description), target: await target(req.project, body.target) };
          if (await catalog.aliases.get(req.project, name)) throw conflict(`Alias "${name}" already exists`);
          await catalog.aliases.put(req.project, name, alias, 0);
          lifecycle(req, 'image-alias-created', name, { target: alias.target });
          return sync({}, { location: aliasUrl(req.project, name) });
        },
      },
    },
    {
      path: '/1.0/images/aliases/{name}',
      extension: 'image_create_aliases',
      current: async (req) => editable((await catalog.alias(req.project, req.params.name!)).doc),
      get: {
        description: 'Show an image alias',
        handler: async (req) => {
          const { doc } = await catalog.alias(req.project, req.params.name!);
          return sync(aliasView(doc, await typeOf(req.project, doc.target)), { etag: editable(doc) });
        },
      },
      put: {
        description: 'Replace the description and target of an image alias',
        body: objectBody({ description: bodyShape.text, target: bodyShape.text }),
        handler: async (req) => {
          const found = await catalog.alias(req.project, req.params.name!);
          const body = bodyOf(req);
          const next: StoredAlias = { ...found.doc, description: description(body.description), target: await target(req.project, body.target) };
          await catalog.aliases.put(req.project, found.name, next, found.rev);
          lifecycle(req, 'image-alias-updated', found.name, { target: next.target });
          return empty();
        },
      },
      post: {
        description: 'Rename an image alias',
        errors: [409],
        body: renameBody,
        handler: async (req) => {
          const oldName = req.params.name!;
          const newName = checkAliasName(bodyOf(req).name);
          const found = await catalog.alias(req.project, oldName);
          if (newName !== oldName) {
            if (await catalog.aliases.get(req.project, newName)) throw conflict(`Alias "${newName}" already exists`);
            await catalog.store.transaction(async (tx) => {
              const aliases = tx.collection<StoredAlias>('aliases');
              await aliases.put(req.project, newName, { ...found.doc, name: newName }, 0);
              await aliases.delete(req.project, oldName, found.rev);
            });
            lifecycle(req, 'image-alias-renamed', newName, { old_name: oldName });
          }
          return sync({}, { location: aliasUrl(req.project, newName) });
        },
      },
      delete: {
        description: 'Delete an image alias',
        handler: async (req) => {
          const found = await catalog.alias(req.project, req.params.name!);
          await catalog.aliases.delete(req.project, found.name, found.rev);
          lifecycle(req, 'image-alias-deleted', found.name);
          return empty();
        },
      },
    },
  ];
}
