/** /1.0/instances/{name}/logs: list, read and delete an instance's log files. */
import { createReadStream } from 'node:fs';
import { rm, stat } from 'node:fs/promises';
import { empty, notFound, raw, sync, type ApiRequest, type PluginContext, type RouteDescriptor } from '../../../sdk/index.js';
import type { InstanceManager } from '../manager.js';
import { checkDeletable, listLogs, logFile } from '../logs.js';
import { instancePaths, subresourceUrl } from './paths.js';

export function logsRoutes(ctx: PluginContext, manager: InstanceManager): RouteDescriptor[] {
  const logUrl = (req: ApiRequest, name: string, file: string) => subresourceUrl(req, name, `logs/${file}`);
  const event = (action: string, req: ApiRequest, name: string, file: string) =>
    ctx.events.lifecycle(action, logUrl(req, name, file), { project: req.project, requestor: req.requestor });

  return [
    {
      ...instancePaths('/{name}/logs'),
      get: {
        handler: async (req) => {
          const handle = await manager.load(req.project, req.params.name);
          return sync((await listLogs(handle.inst.logDir)).map((file) => logUrl(req, handle.name, file)));
        },
      },
    },
    {
      ...instancePaths('/{name}/logs/{file}'),
      get: {
        answers: ['raw'],
        handler: async (req) => {
          const handle = await manager.load(req.project, req.params.name);
          const file = logFile(handle.inst.logDir, req.params.file);
          const st = await stat(file).catch(() => undefined);
          if (!st?.isFile()) throw notFound('Log file not found');
          event('instance-log-retrieved', req, handle.name, req.params.file);
          return raw(createReadStream(file), 'application/octet-stream');
        },
      },
      delete: {
        handler: async (req) => {
          const handle = await manager.load(req.project, req.params.name);
          checkDeletable(req.params.file);
          const file = logFile(handle.inst.logDir, req.params.file);
          if (!(await stat(file).catch(() => undefined))?.isFile()) throw notFound('Log file not found');
          await rm(file, { force: true });
          event('instance-log-deleted', req, handle.name, req.params.file);
          return empty();
        },
      },
    },
  ];
}
