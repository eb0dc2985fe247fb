/** /1.0/projects, /1.0/projects/{name} and /1.0/projects/{name}/state. */
import {
  async, bodyObject, bodyShape, collection, describedConfigBody, empty, forbidden, optionalString, renameBody, stringMap, sync,
  type ApiRequest, type PluginContext, type RouteDescriptor,
} from '../../sdk/index.js';
import type { ProjectEdit, ProjectManager } from './manager.js';
import { checkProjectName } from './names.js';
import { editableView, projectUrl, projectView, type ProjectRecord } from './project.js';
import { projectState } from './state.js';

function editFrom(req: ApiRequest): ProjectEdit {
  const body = bodyObject(req.body);
  return {
    description: optionalString(body.description, 'description') ?? '',
    config: stringMap(body.config, 'config'),
  };
}

/**
 * A restricted client reaches only its own projects: any other name, existing or not, is refused the
 * same way (as the reference does), so the refusal tells nothing about what exists.
 */
function visibleName(req: ApiRequest): string {
  const name = req.params.name!;
  if (req.restrictedTo && !req.restrictedTo.includes(name)) throw forbidden(`Not authorized for project "${name}"`);
  return name;
}

export function projectRoutes(ctx: PluginContext, projects: ProjectManager): RouteDescriptor[] {
  const render = async (p: ProjectRecord) => projectView(p, await projects.usedBy(p.name));

  return [
    {
      path: '/1.0/projects',
      extension: 'projects',
      get: {
        description: 'List the projects',
        conventions: ['recursion', 'filter'],
        // The project named in the query does not matter here: a restricted caller lists its own (maybe none).
        access: 'filtered',
        handler: async (req) => {
          const all = await projects.list();
          const seen = req.restrictedTo ? all.filter((p) => req.restrictedTo!.includes(p.name)) : all;
          return collection(seen, (p) => projectUrl(p.name), render);
        },
      },
      post: {
        description: 'Create a project',
        errors: [409],
        body: describedConfigBody({ name: bodyShape.text }),
        access: 'admin',
        handler: async (req) => {
          const name = checkProjectName(bodyObject(req.body).name);
          await projects.create(name, editFrom(req), req.requestor);
          return sync({}, { location: projectUrl(name) });
        },
      },
    },
    {
      path: '/1.0/projects/{name}',
      extension: 'projects',
      current: async (req) => editableView((await projects.load(req.params.name!)).doc),
      get: {
        description: 'Show a project',
        // The project is the one in the path, not in the query.
        access: 'filtered',
        handler: async (req) => {
          const { doc } = await projects.load(visibleName(req));
          return sync(await render(doc), { etag: editableView(doc) });
        },
      },
      put: {
        description: 'Replace a project\'s description and config',
        body: describedConfigBody(),
        access: 'admin',
        handler: async (req) => {
          await projects.update(req.params.name!, editFrom(req), req.requestor);
          return empty();
        },
      },
      post: {
        description: 'Rename a project',
        errors: [409],
        body: renameBody,
        answers: ['operation'],
        access: 'admin',
        handler: async (req) => {
          const name = req.params.name!;
          const newName = checkProjectName(bodyObject(req.body).name);
          // Refusals come at once; the rename itself is an operation, as lxc waits for one.
          await projects.checkRename(name, newName);
          return async(ctx.operations.create({
            class: 'task',
            description: 'Renaming project',
            project: req.project,
            requestor: req.requestor,
            resources: { projects: [projectUrl(name)] },
            run: () => projects.rename(name, newName, req.requestor),
          }));
        },
      },
      delete: {
        description: 'Delete a project',
        access: 'admin',
        handler: async (req) => {
          await projects.delete(req.params.name!, req.requestor);
          return empty();
        },
      },
    },
    {
      path: '/1.0/projects/{name}/state',
      extension: 'project_usage',
      get: {
        description: 'Current allocations of a project against its limits',
        access: 'filtered',
        handler: async (req) => {
          const { doc } = await projects.load(visibleName(req));
          return sync(await projectState(ctx.services, doc));
        },
      },
    },
  ];
}
