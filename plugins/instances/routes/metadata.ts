/** GET/PUT (and PATCH through `current`) /1.0/instances/{name}/metadata: the instance's metadata.yaml. */
import { bodyShape, empty, objectBody, resourceUrl, sync, type ApiRequest, type PluginContext, type RouteDescriptor } from '../../../sdk/index.js';
import type { InstanceManager } from '../manager.js';
import { metadataFromBody, readMetadata, writeMetadata } from '../templates/metadata-file.js';
import { instancePaths } from './paths.js';

export function metadataRoutes(ctx: PluginContext, manager: InstanceManager): RouteDescriptor {
  const event = (action: string, req: ApiRequest, name: string) => ctx.events.lifecycle(action,
    resourceUrl(`/1.0/instances/${encodeURIComponent(name)}/metadata`, req.project), { project: req.project, requestor: req.requestor });
  const load = (req: ApiRequest) => manager.load(req.project, req.params.name);

  return {
    ...instancePaths('/{name}/metadata'),
    current: async (req) => readMetadata((await load(req)).inst.volumePath),
    get: {
      handler: async (req) => {
        const handle = await load(req);
        const metadata = await readMetadata(handle.inst.volumePath);
        event('instance-metadata-retrieved', req, handle.name);
        return sync(metadata, { etag: metadata });
      },
    },
    put: {
      // Types of the common fields here; metadataFromBody checks the rest (dates, templates).
      body: objectBody({ architecture: bodyShape.text, properties: bodyShape.config, templates: bodyShape.object }),
      handler: async (req) => {
        const metadata = metadataFromBody(req.body);
        const { project, name } = await load(req);
        // Under the instance lock, so a rename or start cannot move the volume mid-write.
        await manager.lock.run(`${project}/${name}`, async () => {
          await writeMetadata((await manager.load(project, name)).inst.volumePath, metadata);
        });
        event('instance-metadata-updated', req, name);
        return empty();
      },
    },
  };
}
