/** /1.0/network-acls and /1.0/network-acls/{name}. */
import {
  badRequest, bodyObject, bodyShape, collection, describedConfigBody, empty, optionalString, renameBody, stringMap, sync,
  type ApiRequest, type RouteDescriptor,
} from '../../sdk/index.js';
import { aclUrl, aclView, editableView, type AclRecord } from './acl.js';
import type { AclEdit, AclManager } from './manager.js';

function editFrom(req: ApiRequest): AclEdit {
  const body = bodyObject(req.body);
  return {
    description: optionalString(body.description, 'description') ?? '',
    ingress: body.ingress,
    egress: body.egress,
    config: stringMap(body.config, 'config'),
  };
}

export function aclRoutes(acls: AclManager): RouteDescriptor[] {
  const render = async (project: string, rec: AclRecord) => aclView(rec, await acls.usedBy(project, rec.name));
  return [
    {
      path: '/1.0/network-acls',
      extension: 'network_acl',
      get: {
        description: 'List the network ACLs of a project',
        conventions: ['recursion', 'filter'],
        handler: async (req) => collection(await acls.list(req.project), (a) => aclUrl(req.project, a.name), (a) => render(req.project, a)),
      },
      post: {
        description: 'Create a network ACL',
        errors: [409],
        body: describedConfigBody({ name: bodyShape.text, ingress: bodyShape.objects, egress: bodyShape.objects }),
        handler: async (req) => {
          const name = optionalString(bodyObject(req.body).name, 'name') ?? '';
          await acls.create(req.project, name, editFrom(req), req.requestor);
          return sync({}, { location: aclUrl(req.project, name) });
        },
      },
    },
    {
      path: '/1.0/network-acls/{name}',
      extension: 'network_acl',
      current: async (req) => editableView((await acls.get(req.project, req.params.name!)).doc),
      get: {
        description: 'Show a network ACL',
        handler: async (req) => {
          const { doc } = await acls.get(req.project, req.params.name!);
          return sync(await render(req.project, doc), { etag: editableView(doc) });
        },
      },
      put: {
        description: 'Replace a network ACL\'s description, rules and config',
        body: describedConfigBody({ ingress: bodyShape.objects, egress: bodyShape.objects }),
        handler: async (req) => {
          await acls.update(req.project, req.params.name!, editFrom(req), req.requestor);
          return empty();
        },
      },
      post: {
        description: 'Rename a network ACL',
        errors: [409],
        body: renameBody,
        handler: async (req) => {
          const newName = optionalString(bodyObject(req.body).name, 'name') ?? '';
          if (newName === req.params.name) throw badRequest('The network ACL already has that name');
          await acls.rename(req.project, req.params.name!, newName, req.requestor);
          return sync({}, { location: aclUrl(req.project, newName) });
        },
      },
      delete: {
        description: 'Delete a network ACL',
        handler: async (req) => {
          await acls.delete(req.project, req.params.name!, req.requestor);
          return empty();
        },
      },
    },
  ];
}
