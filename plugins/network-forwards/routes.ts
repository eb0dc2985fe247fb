/** /1.0/networks/{name}/forwards and /1.0/networks/{name}/forwards/{listen}. */
import {
  bodyObject, bodyShape, collection, describedConfigBody, empty, optionalString, stringMap, sync,
  type ApiRequest, type RouteDescriptor,
} from '../../sdk/index.js';
import { editableView, forwardUrl, forwardView } from './forward.js';
import type { ForwardEdit, ForwardManager } from './manager.js';

function editFrom(req: ApiRequest): ForwardEdit {
  const body = bodyObject(req.body);
  return { description: optionalString(body.description, 'description') ?? '', config: stringMap(body.config, 'config'), ports: body.ports };
}

export function forwardRoutes(forwards: ForwardManager): RouteDescriptor[] {
  const net = (req: ApiRequest) => forwards.network(req.project, req.params.name!);
  return [
    {
      path: '/1.0/networks/{name}/forwards',
      extension: 'network_forward',
      get: {
        description: 'List the forwards of a network',
        conventions: ['recursion', 'filter'],
        handler: async (req) => {
          const n = await net(req);
          return collection(await forwards.list(n), (f) => forwardUrl(req.project, n.name, f.listen_address), (f) => forwardView(f));
        },
      },
      post: {
        description: 'Create a network forward',
        errors: [409],
        body: describedConfigBody({ listen_address: bodyShape.text, ports: bodyShape.objects }),
        handler: async (req) => {
          const n = await net(req);
          const listen = await forwards.create(n, bodyObject(req.body).listen_address, editFrom(req), req.requestor);
          return sync({}, { location: forwardUrl(req.project, n.name, listen) });
        },
      },
    },
    {
      path: '/1.0/networks/{name}/forwards/{listen}',
      extension: 'network_forward',
      current: async (req) => editableView((await forwards.get(await net(req), req.params.listen!)).doc),
      get: {
        description: 'Show a network forward',
        handler: async (req) => {
          const { doc } = await forwards.get(await net(req), req.params.listen!);
          return sync(forwardView(doc), { etag: editableView(doc) });
        },
      },
      put: {
        description: 'Replace a network forward\'s description, default target and ports',
        body: describedConfigBody({ ports: bodyShape.objects }),
        handler: async (req) => {
          await forwards.update(await net(req), req.params.listen!, editFrom(req), req.requestor);
          return empty();
        },
      },
      delete: {
        description: 'Delete a network forward',
        handler: async (req) => {
          await forwards.delete(await net(req), req.params.listen!, req.requestor);
          return empty();
        },
      },
    },
  ];
}
