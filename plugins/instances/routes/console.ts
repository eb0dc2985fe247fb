/** /1.0/instances/{name}/console: attach to the console (websocket operation) and read or clear its log. */
import { readFile, truncate } from 'node:fs/promises';
import { async, badRequest, empty, raw, type PluginContext, type RouteDescriptor } from '../../../sdk/index.js';
import type { InstanceManager } from '../manager.js';
import type { PowerControl } from '../power.js';
import { instancePaths } from './paths.js';
import { consoleBody } from '../shape.js';
import { sessionOperation } from './session-sockets.js';
import { SocketOutput } from './socket-output.js';
import { vgaOperation } from './vga-console.js';

export function consoleRoutes(ctx: PluginContext, manager: InstanceManager, power: PowerControl): RouteDescriptor {
  return {
    ...instancePaths('/{name}/console'),
    post: {
      body: consoleBody,
      answers: ['operation'],
      handler: async (req) => {
        const handle = await manager.load(req.project, req.params.name);
        const body = req.body ?? {};
        const type = body.type ?? 'console';
        if (type !== 'console' && type !== 'vga') throw badRequest(`Unknown console type "${type}"`);
        const vga = handle.driver.vgaConsole?.bind(handle.driver);
        if (type === 'vga' && !vga) throw badRequest('VGA console is only supported by virtual machines');
        const status = await power.status(handle);
        if (status === 'Frozen' && type === 'vga') throw badRequest('Instance is frozen');
        if (status !== 'Running') throw badRequest('Instance is not running');
        const width = Number(body.width) || 80;
        const height = Number(body.height) || 25;
        manager.lifecycle('instance-console', handle, req, { type });
        if (vga && type === 'vga') return async(vgaOperation(ctx, req, handle.name, () => vga(handle.inst)));
        return async(sessionOperation(ctx, req, handle.name, 'Showing console', ['0', 'control'], async (sockets, op) => {
          const session = await handle.driver.console(handle.inst, { width, height });
          sockets.onControl((msg) => {
            if (msg.command === 'window-resize' && msg.args) session.resize(Number(msg.args.width) || width, Number(msg.args.height) || height);
          });
          // A console has no end of input: only detaching (a socket closing) or the operation ending stops it.
          sockets.input('0')!.pipe(session.input, () => undefined);
          const detached = new Promise<void>((resolve) => {
            sockets.onClose('0', resolve);
            sockets.onClose('control', resolve);
            if (op.signal.aborted) resolve();
            else op.signal.addEventListener('abort', () => resolve(), { once: true });
          });
          const output = new SocketOutput(session.output, sockets.get('0'));
          await Promise.race([detached, output.ended]);
          session.close();
          sockets.closeAll();
        }));
      },
    },
    get: {
      answers: ['raw'],
      handler: async (req) => {
        const handle = await manager.load(req.project, req.params.name);
        const text = await readFile(handle.driver.consoleLogPath(handle.inst)).catch(() => Buffer.alloc(0));
        return raw(text, 'application/octet-stream');
      },
    },
    delete: {
      handler: async (req) => {
        const handle = await manager.load(req.project, req.params.name);
        await truncate(handle.driver.consoleLogPath(handle.inst), 0).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== 'ENOENT') throw err;
        });
        return empty();
      },
    },
  };
}
