/** /1.0/profiles and /1.0/profiles/{name}. */
import {
  bodyObject, bodyShape, collection, describedConfigBody, empty, optionalString, renameBody, stringMap, sync, UsedByMemo,
  type ApiRequest, type RouteDescriptor,
} from '../../sdk/index.js';
import type { ProfileEdit, ProfileManager } from './manager.js';
import { checkProfileName } from './names.js';
import { editableView, profileUrl, profileView, type Profile } from './profile.js';
import { deviceMap } from './shape.js';

function editFrom(req: ApiRequest): ProfileEdit {
  const body = bodyObject(req.body);
  return {
    description: optionalString(body.description, 'description') ?? '',
    config: stringMap(body.config, 'config'),
    devices: deviceMap(body.devices),
  };
}

export function profileRoutes(profiles: ProfileManager): RouteDescriptor[] {
  const render = async (project: string, p: Profile, memo?: UsedByMemo) => profileView(p, await profiles.usedBy.collect(project, p.name, memo));

  return [
    {
      path: '/1.0/profiles',
      extension: 'profile_usedby',
      get: {
        description: 'List the profiles of a project',
        conventions: ['recursion', 'filter'],
        // Profiles and their users are records: nothing else shows.
        reuse: true,
        handler: async (req) => {
          const memo = new UsedByMemo();
          return collection(await profiles.list(req.project), (p) => profileUrl(req.project, p.name), (p) => render(req.project, p, memo));
        },
      },
      post: {
        description: 'Create a profile',
        errors: [409],
        body: describedConfigBody({ name: bodyShape.text, devices: bodyShape.devices }),
        handler: async (req) => {
          const name = checkProfileName(bodyObject(req.body).name);
          await profiles.create(req.project, { name, ...editFrom(req) }, req.requestor);
          return sync({}, { location: profileUrl(req.project, name) });
        },
      },
    },
    {
      path: '/1.0/profiles/{name}',
      extension: 'profile_usedby',
      current: async (req) => editableView((await profiles.get(req.project, req.params.name!)).doc),
      get: {
        description: 'Show a profile',
        // As the listing: a profile and its users are records (at 10,000 instances used_by is most of it).
        reuse: true,
        handler: async (req) => {
          const { doc } = await profiles.get(req.project, req.params.name!);
          return sync(await render(req.project, doc), { etag: editableView(doc) });
        },
      },
      put: {
        description: 'Replace a profile',
        body: describedConfigBody({ devices: bodyShape.devices }),
        handler: async (req) => {
          await profiles.update(req.project, req.params.name!, editFrom(req), req.requestor);
          return empty();
        },
      },
      post: {
        description: 'Rename a profile',
        errors: [409],
        body: renameBody,
        handler: async (req) => {
          const newName = checkProfileName(bodyObject(req.body).name);
          await profiles.rename(req.project, req.params.name!, newName, req.requestor);
          return sync({}, { location: profileUrl(req.project, newName) });
        },
      },
      delete: {
        description: 'Delete a profile',
        handler: async (req) => {
          await profiles.delete(req.project, req.params.name!, req.requestor);
          return empty();
        },
      },
    },
  ];
}
