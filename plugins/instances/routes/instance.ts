/** GET/PUT/PATCH/DELETE/POST (rename) /1.0/instances/{name}. */
import path from 'node:path';
import { async, badRequest, conflict, empty, mergePatch, sync, type ApiRequest, type OperationControl, type PluginContext, type RouteDescriptor } from '../../../sdk/index.js';
import { watchCopyProgress } from '../copy-progress.js';
import type { InstanceManager, InstanceEdit } from '../manager.js';
import type { InstanceHandle } from '../access.js';
import type { PowerControl } from '../power.js';
import { checkInstanceName } from '../names.js';
import { deviceMap, instanceEditBody, instanceMoveBody, optionalBool, optionalString, profileList, stringMap } from '../shape.js';
import { editableView, fullView, instanceView } from '../render.js';
import { instancePaths, operationResources } from './paths.js';
import type { SnapshotManager } from '../snapshots/manager.js';
import { migrationSourceOperation } from '../migration/source.js';
import { moveToPool } from '../pool-move.js';
import { prepareProjectMove } from '../project-move.js';
import { checkClusterMove, moveToMember } from '../cluster-move.js';
import { checkTargetAllowed } from '../placement.js';

function editFrom(body: any, handle: InstanceHandle): InstanceEdit {
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw badRequest('The request body must be an instance definition');
  return {
    architecture: optionalString(body.architecture, 'architecture') || handle.record.architecture,
    config: stringMap(body.config, 'config'),
    devices: deviceMap(body.devices),
    ephemeral: optionalBool(body.ephemeral, 'ephemeral') ?? false,
    profiles: profileList(body.profiles) ?? [],
    description: optionalString(body.description, 'description') ?? '',
  };
}

export function instanceRoutes(ctx: PluginContext, manager: InstanceManager, power: PowerControl, snapshots: SnapshotManager): RouteDescriptor {
  const task = (req: ApiRequest, handle: InstanceHandle, description: string, run: (op: OperationControl) => Promise<void>) => async(ctx.operations.create({
    class: 'task', description, project: req.project, requestor: req.requestor, resources: operationResources(handle.name),
    run: (op) => manager.lock.run(`${handle.project}/${handle.name}`, () => run(op)),
  }));

  return {
    ...instancePaths('/{name}'),
    current: async (req) => editableView(await manager.load(req.project, req.params.name)),
    get: {
      // recursion=1 adds the state, snapshots and backups.
      conventions: ['recursion'],
      handler: async (req) => {
        const handle = await manager.load(req.project, req.params.name);
        const view = req.recursion > 0 ? await fullView(handle, manager) : instanceView(handle, await power.status(handle));
        return sync(view, { etag: editableView(handle) });
      },
    },
    put: {
      body: instanceEditBody,
      answers: ['operation'],
      handler: async (req) => {
        const handle = await manager.load(req.project, req.params.name);
        if (req.body?.restore !== undefined && req.body?.restore !== '') {
          if (typeof req.body.restore !== 'string') throw badRequest('"restore" must be a snapshot name');
          if (req.body.stateful === true) throw badRequest('Stateful restore needs CRIU, which this daemon does not provide');
          // Clients send the snapshot alone or as `<instance>/<snapshot>` (lxc does the latter).
          const cut = req.body.restore.indexOf('/');
          if (cut >= 0 && req.body.restore.slice(0, cut) !== handle.name) throw badRequest(`"${req.body.restore}" is not a snapshot of this instance`);
          const snapshot = req.body.restore.slice(cut + 1);
          await snapshots.load(handle, snapshot);
          // A running instance is stopped for the restore and started again, as the reference does.
          return task(req, handle, 'Restoring snapshot', async () => {
            const fresh = await manager.load(handle.project, handle.name);
            const wasRunning = (await power.status(fresh)) !== 'Stopped';
            if (wasRunning) await power.stop(fresh, { force: true, timeout: -1 }, req, true);
            await snapshots.restore(fresh, snapshot, req);
            if (wasRunning) await power.start(await manager.load(handle.project, handle.name), req, true);
          });
        }
        const edit = editFrom(req.body, handle);
        // Check now so that a bad edit is refused synchronously, not as a failed operation.
        await manager.check(handle.project, handle.record.type, edit, { action: 'update', name: handle.name, replaces: handle.name });
        return task(req, handle, 'Updating instance', async () => {
          const fresh = await manager.load(handle.project, handle.name);
          // A PUT replaces the whole definition: only an ETag the client sent can make it stale.
          req.checkIfMatch(editableView(fresh));
          await manager.update(fresh, editFrom(req.body, fresh), (await power.status(fresh)) !== 'Stopped', req);
        });
      },
    },
    patch: {
      body: instanceEditBody,
      description: 'Change some fields of an instance (synchronous, as the reference answers it)',
      // Read, merge and write under the instance's lock: concurrent PATCHes of different keys all land.
      handler: (req) => manager.lock.run(`${req.project}/${req.params.name}`, async () => {
        const handle = await manager.load(req.project, req.params.name);
        const current = editableView(handle);
        req.checkIfMatch(current);
        const edit = editFrom(mergePatch(current, req.body), handle);
        await manager.update(handle, edit, (await power.status(handle)) !== 'Stopped', req);
        return empty();
      }),
    },
    delete: {
      answers: ['operation'],
      handler: async (req) => {
        const handle = await manager.load(req.project, req.params.name);
        if ((await power.status(handle)) !== 'Stopped') throw badRequest('The instance is running; stop it first');
        return task(req, handle, 'Deleting instance', async () => {
          const fresh = await manager.load(handle.project, handle.name);
          if ((await power.status(fresh)) !== 'Stopped') throw badRequest('The instance is running; stop it first');
          power.forget(fresh.project, fresh.name);
          await manager.remove(fresh, req);
        });
      },
    },
    post: {
      body: instanceMoveBody,
      answers: ['operation'],
      errors: [409],
      handler: async (req) => {
        const body = req.body ?? {};
        if (body.project !== undefined && body.project !== null && typeof body.project !== 'string') throw badRequest('"project" must be a project name');
        const toProject = body.project && body.project !== req.project ? body.project as string : undefined;
        // lxc sends pool and project moves as a migration with `pool` or `project` set and no target: those are served locally.
        // An object `target` is a push-mode migration's target; a name would be a cluster member.
        const pushTo = body.target && typeof body.target === 'object' ? body.target as Record<string, unknown> : undefined;
        // `?target=` with a migration: a move to another member of the cluster (cluster-move.ts).
        if (ctx.cluster.enabled && req.target && body.migration && !body.pool && !toProject && !pushTo) {
          const handle = await manager.load(req.project, req.params.name);
          await checkTargetAllowed(ctx, req);
          await checkClusterMove(ctx, manager, handle, req.target, body.name ? checkInstanceName(body.name) : handle.name);
          const member = req.target;
          return async(ctx.operations.create({
            class: 'task', description: 'Migrating instance', project: req.project, requestor: req.requestor, resources: operationResources(handle.name),
            run: (op) => moveToMember(ctx, manager, power, snapshots, handle, member, op, req),
          }));
        }
        if (body.target && !pushTo) throw badRequest('Moving to another cluster member needs clustering, which this build lacks');
        const handle = await manager.load(req.project, req.params.name);
        if ((body.migration && !body.pool && !toProject) || pushTo) {
          const op = await migrationSourceOperation(ctx, manager, power, snapshots, req, handle, {
            live: body.live === true, instanceOnly: body.instance_only === true || body.container_only === true, target: pushTo,
          });
          return async(op);
        }
        if (toProject) {
          if (body.pool) throw badRequest('An instance moves to another project or to another pool, not both at once');
          const newName = body.name ? checkInstanceName(body.name) : handle.name;
          const prepared = await prepareProjectMove(ctx, manager, handle, toProject, newName);
          if ((await power.status(handle)) !== 'Stopped') throw badRequest('Moving a running instance to another project is not allowed; stop it first');
          return task(req, handle, 'Migrating instance', async () => {
            const fresh = await manager.load(handle.project, handle.name);
            if ((await power.status(fresh)) !== 'Stopped') throw badRequest('Moving a running instance to another project is not allowed; stop it first');
            await prepared.recheck();
            await manager.moveToProject(fresh, toProject, newName, req);
          });
        }
        if (body.pool !== undefined && body.pool !== '') {
          if (typeof body.pool !== 'string') throw badRequest('"pool" must be a storage pool name');
          const pool = body.pool;
          if (pool === handle.record.pool) throw badRequest(`The instance is already on storage pool "${pool}"`);
          await manager.deps.storage.pool(pool);
          if ((await power.status(handle)) !== 'Stopped') throw badRequest('Moving a running instance to another pool is not allowed; stop it first');
          const newName = body.name && body.name !== handle.name ? checkInstanceName(body.name) : undefined;
          if (newName && (await manager.records.get(req.project, newName))) throw conflict(`Name "${newName}" already in use`);
          return task(req, handle, 'Moving instance', async (op) => {
            const target = await manager.deps.storage.volumePath(pool, { type: handle.record.type, project: handle.project, name: handle.name });
            const stopProgress = await watchCopyProgress(op, path.dirname(target));
            try {
              let moved = await moveToPool(manager, snapshots, await manager.load(handle.project, handle.name), pool, req);
              if (newName) moved = await manager.rename(moved, newName, req, 'pool-move');
            } finally {
              stopProgress();
            }
          });
        }
        const newName = checkInstanceName(body.name);
        if (newName === handle.name) throw badRequest('The new name is the current name');
        if ((await power.status(handle)) !== 'Stopped') throw badRequest('Renaming of running instance not allowed');
        if (await manager.records.get(req.project, newName)) throw conflict(`Name "${newName}" already in use`);
        return task(req, handle, 'Renaming instance', async () => {
          await manager.rename(await manager.load(handle.project, handle.name), newName, req);
        });
      },
    },
  };
}
