/** /1.0/instances/{name}/snapshots and /snapshots/{snapshot}: list, create, show, edit, rename, delete. */
import { async, badRequest, collection, resourceUrl, sync, type ApiRequest, type PluginContext, type RouteDescriptor } from '../../../sdk/index.js';
import type { InstanceHandle } from '../access.js';
import type { InstanceManager } from '../manager.js';
import { parseExpiresAt, type SnapshotManager } from '../snapshots/manager.js';
import { checkSnapshotName } from '../../../sdk/lib/snapshots/pattern.js';
import { instancePaths, operationResources, subresourcePath } from './paths.js';
import { snapshotCreateBody, snapshotEditBody, snapshotMoveBody } from '../shape.js';
import type { PowerControl } from '../power.js';
import { migrationSourceOperation } from '../migration/source.js';

function bodyOf(req: ApiRequest): Record<string, unknown> {
  const body = req.body ?? {};
  if (typeof body !== 'object' || Array.isArray(body)) throw badRequest('The request body must be a JSON object');
  return body;
}

export function snapshotRoutes(ctx: PluginContext, manager: InstanceManager, power: PowerControl, snapshots: SnapshotManager): RouteDescriptor[] {
  /** Snapshot work runs as an operation under the instance's lock, on a fresh read of the instance. */
  const task = (req: ApiRequest, handle: InstanceHandle, description: string, run: (fresh: InstanceHandle) => Promise<void>) => async(ctx.operations.create({
    class: 'task', description, project: req.project, requestor: req.requestor, resources: operationResources(handle.name),
    run: () => manager.lock.run(`${handle.project}/${handle.name}`, async () => run(await manager.load(handle.project, handle.name))),
  }));

  return [
    {
      ...instancePaths('/{name}/snapshots'),
      get: {
        conventions: ['recursion', 'filter'],
        handler: async (req) => {
          const handle = await manager.load(req.project, req.params.name);
          const base = subresourcePath(handle.name, 'snapshots');
          return collection(await snapshots.list(handle), (s) => resourceUrl(`${base}/${encodeURIComponent(s.doc.name)}`, handle.project), (s) => snapshots.view(handle, s));
        },
      },
      post: {
        body: snapshotCreateBody,
        answers: ['operation'],
        errors: [409],
        handler: async (req) => {
          const body = bodyOf(req);
          const handle = await manager.load(req.project, req.params.name);
          await manager.vetChild('snapshot', handle);
          if (body.stateful === true) throw badRequest('Stateful snapshots need CRIU, which this daemon does not provide');
          if (body.name !== undefined && body.name !== null && typeof body.name !== 'string') throw badRequest('"name" must be a string');
          const request = {
            name: (body.name as string | undefined) || undefined,
            // null (what `lxc snapshot` sends) and absent both mean "from snapshots.expiry".
            expiresAt: body.expires_at === undefined || body.expires_at === null ? undefined : parseExpiresAt(body.expires_at),
          };
          // Name and expiry are checked now so that bad input is a 400, not a failed operation.
          const planned = await snapshots.plan(handle, request);
          return task(req, handle, 'Snapshotting instance', async (fresh) => {
            await snapshots.create(fresh, { ...request, name: planned.name }, req);
          });
        },
      },
    },
    {
      ...instancePaths('/{name}/snapshots/{snapshot}'),
      get: {
        handler: async (req) => {
          const handle = await manager.load(req.project, req.params.name);
          const stored = await snapshots.load(handle, req.params.snapshot);
          const size = await snapshots.size(handle, req.params.snapshot);
          return sync(await snapshots.view(handle, stored, size), { etag: { expires_at: stored.doc.expires_at } });
        },
      },
      put: {
        body: snapshotEditBody,
        answers: ['operation'],
        handler: async (req) => {
          const body = bodyOf(req);
          const handle = await manager.load(req.project, req.params.name);
          await snapshots.load(handle, req.params.snapshot);
          const expiresAt = parseExpiresAt(body.expires_at);
          return task(req, handle, 'Updating snapshot', (fresh) => snapshots.setExpiry(fresh, req.params.snapshot, expiresAt, req));
        },
      },
      patch: {
        body: snapshotEditBody,
        answers: ['operation'],
        handler: async (req) => {
          const body = bodyOf(req);
          const handle = await manager.load(req.project, req.params.name);
          const stored = await snapshots.load(handle, req.params.snapshot);
          const expiresAt = 'expires_at' in body ? parseExpiresAt(body.expires_at) : stored.doc.expires_at;
          return task(req, handle, 'Updating snapshot', (fresh) => snapshots.setExpiry(fresh, req.params.snapshot, expiresAt, req));
        },
      },
      post: {
        body: snapshotMoveBody,
        answers: ['operation'],
        errors: [409],
        handler: async (req) => {
          const body = bodyOf(req);
          const handle = await manager.load(req.project, req.params.name);
          await snapshots.load(handle, req.params.snapshot);
          // A migration source for the snapshot alone (a copy of it to another server or cluster member):
          // pulled by the target, or pushed to the `target` object's operation.
          if (body.migration === true) {
            // The name the copy will have: clients send it, and the reference refuses a request without it.
            if (typeof body.name !== 'string' || body.name === '') throw badRequest('A migration of a snapshot needs the name of the instance it becomes ("name")');
            const pushTo = body.target && typeof body.target === 'object' ? body.target as Record<string, unknown> : undefined;
            return async(await migrationSourceOperation(ctx, manager, power, snapshots, req, handle, {
              live: body.live === true, instanceOnly: true, target: pushTo, snapshot: req.params.snapshot,
            }));
          }
          if (typeof body.name !== 'string' || body.name === '') throw badRequest('The new snapshot name ("name") is required');
          const newName = body.name;
          checkSnapshotName(newName);
          return task(req, handle, 'Renaming snapshot', (fresh) => snapshots.rename(fresh, req.params.snapshot, newName, req));
        },
      },
      delete: {
        answers: ['operation'],
        handler: async (req) => {
          const handle = await manager.load(req.project, req.params.name);
          await snapshots.load(handle, req.params.snapshot);
          return task(req, handle, 'Deleting snapshot', (fresh) => snapshots.remove(fresh, req.params.snapshot, req));
        },
      },
    },
  ];
}
