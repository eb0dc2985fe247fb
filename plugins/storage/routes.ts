/** /1.0/storage-pools, /1.0/storage-pools/{name} and /1.0/storage-pools/{name}/resources. */
import {
  badRequest, bodyObject, bodyShape, collection, describedConfigBody, empty, optionalString, stringMap, sync, UsedByMemo, visibleUrls,
  type ApiRequest, type RouteDescriptor,
} from '../../sdk/index.js';
import { checkPoolName } from './names.js';
import { editableView, poolUrl, poolView, type PoolRecord } from './pool.js';
import type { PoolEdit, PoolManager } from './pools.js';

function createBody(req: ApiRequest): PoolRecord {
  const body = bodyObject(req.body);
  const name = checkPoolName(body.name);
  const driver = optionalString(body.driver, 'driver') ?? '';
  if (driver === '') throw badRequest('No driver provided');
  return { name, driver, description: optionalString(body.description, 'description') ?? '', config: stringMap(body.config, 'config') };
}

function editBody(req: ApiRequest): PoolEdit {
  const body = bodyObject(req.body);
  return { description: optionalString(body.description, 'description') ?? '', config: stringMap(body.config, 'config') };
}

/** In a cluster `?target=` shows that member's own keys too (the kernel forwarded the request to it). */
const configFor = (req: ApiRequest, pool: PoolRecord) => (req.target && pool.members ? { ...pool.config, ...pool.members[req.target]?.config } : pool.config);

export function poolRoutes(pools: PoolManager): RouteDescriptor[] {
  // Pools are shared by all projects: a restricted caller sees them, but only its own projects' users of them.
  // Its config (host paths, sizes) is the server's business: a restricted caller gets none, as from the reference.
  const render = async (req: ApiRequest, pool: PoolRecord, memo?: UsedByMemo) => {
    const view = poolView(pool, pools.status(pool.name, pool), visibleUrls(await pools.usedBy.collect('default', pool.name, memo), req.restrictedTo), configFor(req, pool));
    return req.restrictedTo ? { ...view, config: null } : view;
  };

  return [
    {
      path: '/1.0/storage-pools',
      extension: 'storage',
      get: {
        description: 'List the storage pools',
        conventions: ['recursion', 'filter'],
        access: 'filtered',
        handler: async (req) => {
          const memo = new UsedByMemo();
          return collection(await pools.list(), (p) => poolUrl(p.name), (p) => render(req, p, memo));
        },
      },
      post: {
        access: 'admin',
        description: 'Create a storage pool',
        errors: [409],
        body: describedConfigBody({ name: bodyShape.text, driver: bodyShape.text }),
        handler: async (req) => {
          const pool = createBody(req);
          await pools.create(pool, req.requestor, req.target);
          return sync({}, { location: poolUrl(pool.name) });
        },
      },
    },
    {
      path: '/1.0/storage-pools/{name}',
      extension: 'storage',
      current: async (req) => {
        const { doc } = await pools.get(req.params.name!);
        return { ...editableView(doc), config: configFor(req, doc) };
      },
      get: {
        description: 'Show a storage pool',
        access: 'filtered',
        handler: async (req) => {
          const { doc } = await pools.get(req.params.name!);
          return sync(await render(req, doc), { etag: { ...editableView(doc), config: configFor(req, doc) } });
        },
      },
      put: {
        access: 'admin',
        description: 'Replace the configuration of a storage pool',
        body: describedConfigBody(),
        handler: async (req) => {
          await pools.update(req.params.name!, editBody(req), req.requestor, req.target);
          return empty();
        },
      },
      delete: {
        access: 'admin',
        description: 'Delete a storage pool',
        handler: async (req) => {
          await pools.delete(req.params.name!, req.requestor);
          return empty();
        },
      },
    },
    {
      path: '/1.0/storage-pools/{name}/resources',
      extension: 'storage',
      get: {
        description: 'Space and inodes of a storage pool',
        access: 'filtered',
        handler: async (req) => {
          const { info, driver } = await pools.usable(req.params.name!);
          return sync(await driver.resources(info));
        },
      },
    },
  ];
}
