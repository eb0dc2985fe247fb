/** `/1.0/cluster/groups` and `/1.0/cluster/groups/<name>` (`clustering_groups`): the store is groups.ts. */
import { bodyObject, bodyShape, collection, empty, notFound, objectBody, sync, type RouteDescriptor } from '../../sdk/index.js';
import { requireClustered, type Clustering } from './context.js';
import { editableGroup, groupUrl, type GroupView } from './groups.js';

const groupBody = objectBody({ name: bodyShape.text, description: bodyShape.text, members: bodyShape.names });
const groupPutBody = objectBody({ description: bodyShape.text, members: bodyShape.names });

export function groupRoutes(c: Clustering): RouteDescriptor[] {
  const find = async (name: string): Promise<GroupView> => {
    requireClustered(c);
    const view = await c.groups.view(name);
    if (!view) throw notFound('Cluster group not found');
    return view;
  };

  return [
    {
      path: '/1.0/cluster/groups',
      extension: 'clustering_groups',
      get: {
        description: 'List the cluster groups (every member is in "default" until put elsewhere)',
        conventions: ['recursion', 'filter'],
        errors: [503],
        handler: async () => {
          requireClustered(c);
          return collection(await c.groups.views(), (g) => groupUrl(g.name), (g) => g);
        },
      },
      post: {
        description: 'Create a cluster group, optionally with members',
        access: 'admin',
        errors: [404, 409, 503],
        body: groupBody,
        handler: async (req) => {
          requireClustered(c);
          const body = bodyObject(req.body);
          const name = body.name as string;
          await c.groups.create(name, typeof body.description === 'string' ? body.description : '', body.members);
          c.events.lifecycle('cluster-group-created', groupUrl(name), { requestor: req.requestor });
          // 200 with a Location, as every creation here answers (decision 0001; the reference answers 201).
          return sync({}, { location: groupUrl(name) });
        },
      },
    },
    {
      path: '/1.0/cluster/groups/{name}',
      extension: 'clustering_groups',
      current: async (req) => editableGroup(await find(req.params.name!)),
      get: {
        description: 'Show a cluster group and its members',
        errors: [404, 503],
        handler: async (req) => {
          const view = await find(req.params.name!);
          return sync(view, { etag: editableGroup(view) });
        },
      },
      put: {
        description: 'Replace a cluster group\'s description and members (members moved in or out of it)',
        access: 'admin',
        errors: [404, 412, 503],
        body: groupPutBody,
        handler: async (req) => {
          requireClustered(c);
          const body = bodyObject(req.body);
          await c.groups.update(req.params.name!, body.description, body.members);
          c.events.lifecycle('cluster-group-updated', groupUrl(req.params.name!), {
            requestor: req.requestor, context: { description: body.description ?? '', members: body.members ?? [] },
          });
          return empty();
        },
      },
      post: {
        description: 'Rename a cluster group ("default" cannot be renamed)',
        access: 'admin',
        errors: [404, 409, 503],
        body: objectBody({ name: bodyShape.text }),
        handler: async (req) => {
          requireClustered(c);
          const to = await c.groups.rename(req.params.name!, req.body.name);
          c.events.lifecycle('cluster-group-renamed', groupUrl(to), { requestor: req.requestor, context: { old_name: req.params.name } });
          return sync({}, { location: groupUrl(to) });
        },
      },
      delete: {
        description: 'Delete an empty cluster group ("default" cannot be deleted)',
        access: 'admin',
        errors: [404, 503],
        handler: async (req) => {
          requireClustered(c);
          await c.groups.delete(req.params.name!);
          c.events.lifecycle('cluster-group-deleted', groupUrl(req.params.name!), { requestor: req.requestor });
          return empty();
        },
      },
    },
  ];
}
