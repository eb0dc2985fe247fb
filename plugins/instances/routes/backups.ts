/**
 * /1.0/instances/{name}/backups (list, create), /backups/{backup} (show, rename, delete) and
 * /backups/{backup}/export (download). Changes run as operations under the instance's lock, as
 * snapshot changes do, so a backup never races a rename, delete or restore of its instance.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import {
  async, bodyObject, bodyShape, collection, createReleasing, notFound, objectBody, raw, renameBody, resourceUrl,
  sync, type ApiRequest, type OperationControl, type PluginContext, type RouteDescriptor,
} from '../../../sdk/index.js';
import { formatExtension } from '../../../sdk/lib/archive/index.js';
import { type BackupAlgorithm as Algorithm } from '../../../sdk/lib/backup/index.js';
import type { InstanceHandle } from '../access.js';
import type { InstanceManager } from '../manager.js';
import type { BackupManager } from '../backups/manager.js';
import { backupView } from '../backups/record.js';
import { instancePaths, operationResources, subresourcePath } from './paths.js';

export function backupRoutes(ctx: PluginContext, manager: InstanceManager, backups: BackupManager): RouteDescriptor[] {
  const task = (
    req: ApiRequest, handle: InstanceHandle, description: string, backup: string,
    run: (fresh: InstanceHandle, op: OperationControl) => Promise<unknown>, release?: () => void,
  ) => async(createReleasing(ctx.operations, {
    class: 'task',
    description,
    project: req.project,
    requestor: req.requestor,
    // lxc 5.0.2 takes the backup name as what follows "/1.0/backups/" here, as the reference writes it.
    resources: { ...operationResources(handle.name), backups: [`/1.0/backups/${backup}`] },
    run: async (op) => {
      await manager.lock.run(`${handle.project}/${handle.name}`, async () => run(await manager.load(handle.project, handle.name), op));
    },
  }, release));

  return [
    {
      ...instancePaths('/{name}/backups'),
      extension: 'container_backup',
      get: {
        description: 'List the backups of an instance',
        conventions: ['recursion', 'filter'],
        handler: async (req) => {
          const handle = await manager.load(req.project, req.params.name);
          const base = subresourcePath(handle.name, 'backups');
          return collection(await backups.list(handle), (s) => resourceUrl(`${base}/${encodeURIComponent(s.doc.name)}`, handle.project), (s) => backupView(s.doc));
        },
      },
      post: {
        description: 'Back up an instance (and its snapshots) into a tarball',
        errors: [409],
        answers: ['operation'],
        body: objectBody({ name: bodyShape.text, expires_at: bodyShape.text, instance_only: bodyShape.flag, container_only: bodyShape.flag, optimized_storage: bodyShape.flag, compression_algorithm: bodyShape.text }),
        handler: async (req) => {
          const body = bodyObject(req.body);
          const handle = await manager.load(req.project, req.params.name);
          await manager.vetChild('backup', handle);
          // Name, compression and expiry are checked now: bad input is a 400 or 409, not a failed operation.
          const request = await backups.plan(handle, body);
          const release = backups.reserve(handle, request.name);
          return task(req, handle, 'Backing up instance', request.name, (fresh, op) => backups.create(fresh, request, op, req), release);
        },
      },
    },
    {
      ...instancePaths('/{name}/backups/{backup}'),
      extension: 'container_backup',
      get: {
        description: 'Show an instance backup',
        handler: async (req) => {
          const handle = await manager.load(req.project, req.params.name);
          return sync(backupView((await backups.load(handle, req.params.backup!)).doc));
        },
      },
      post: {
        description: 'Rename an instance backup',
        errors: [409],
        answers: ['operation'],
        body: renameBody,
        handler: async (req) => {
          const body = bodyObject(req.body);
          const handle = await manager.load(req.project, req.params.name);
          const backup = req.params.backup!;
          const newName = await backups.checkRename(handle, backup, body.name);
          return task(req, handle, 'Renaming instance backup', newName, (fresh) => backups.rename(fresh, backup, newName, req));
        },
      },
      delete: {
        description: 'Delete an instance backup',
        answers: ['operation'],
        handler: async (req) => {
          const handle = await manager.load(req.project, req.params.name);
          const backup = req.params.backup!;
          await backups.load(handle, backup);
          return task(req, handle, 'Deleting instance backup', backup, (fresh) => backups.remove(fresh, backup, req));
        },
      },
    },
    {
      ...instancePaths('/{name}/backups/{backup}/export'),
      extension: 'container_backup',
      get: {
        description: 'Download an instance backup tarball',
        answers: ['raw'],
        handler: async (req) => {
          const handle = await manager.load(req.project, req.params.name);
          const stored = await backups.load(handle, req.params.backup!);
          const file = backups.file(handle, stored.doc.name);
          const st = await stat(file).catch(() => {
            throw notFound('The backup tarball is missing');
          });
          const ext = formatExtension({ kind: 'tar', compression: stored.doc.compression_algorithm as Algorithm });
          return raw(createReadStream(file), 'application/octet-stream', {
            'Content-Disposition': `inline;filename=${encodeURIComponent(stored.doc.name)}${ext}`,
            'Content-Length': String(st.size),
            'Last-Modified': st.mtime.toUTCString(),
          });
        },
      },
    },
  ];
}
