/** POST /1.0/instances/{name}/exec: commands inside a running instance, over websockets or recorded to files. */
import { createWriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { finished } from 'node:stream/promises';
import path from 'node:path';
import {
  async, badRequest, type ExecSpec, type PluginContext, type RouteDescriptor,
} from '../../../sdk/index.js';
import type { InstanceHandle } from '../access.js';
import type { InstanceManager } from '../manager.js';
import type { PowerControl } from '../power.js';
import { execBody, optionalBool, optionalString, stringMap } from '../shape.js';
import { execRecordNames } from '../logs.js';
import { instancePaths, operationResources, subresourceUrl } from './paths.js';
import { sessionOperation } from './session-sockets.js';
import { SocketOutput } from './socket-output.js';

const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** After the command exited, output still flowing is relayed; a stream quiet this long is done. */
const OUTPUT_QUIET_MS = 500;

/** `fn` once `signal` aborts, or at once when it already has (the abort may come while the command starts). */
function whenAborted(signal: AbortSignal, fn: () => void): void {
  if (signal.aborted) fn();
  else signal.addEventListener('abort', fn, { once: true });
}

function optionalId(value: unknown, what: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Number.isInteger(value) || (value as number) < 0) throw badRequest(`"${what}" must be a non-negative whole number`);
  return value as number;
}

function execSpec(body: any, handle: InstanceHandle): ExecSpec {
  if (!body || typeof body !== 'object') throw badRequest('The request body must describe the command');
  const command = body.command;
  if (!Array.isArray(command) || command.length === 0 || command.some((c: unknown) => typeof c !== 'string')) {
    throw badRequest('"command" must be a non-empty list of strings');
  }
  const user = optionalId(body.user, 'user');
  const fromConfig: Record<string, string> = {};
  for (const [k, v] of Object.entries(handle.inst.config)) if (k.startsWith('environment.')) fromConfig[k.slice('environment.'.length)] = v;
  const environment = {
    PATH: DEFAULT_PATH,
    LANG: 'C.UTF-8',
    ...(user === undefined || user === 0 ? { HOME: '/root', USER: 'root' } : {}),
    ...fromConfig,
    ...stringMap(body.environment, 'environment'),
  };
  const width = optionalId(body.width, 'width');
  const height = optionalId(body.height, 'height');
  return {
    command,
    environment,
    cwd: optionalString(body.cwd, 'cwd') || undefined,
    user,
    group: optionalId(body.group, 'group'),
    interactive: optionalBool(body.interactive, 'interactive') ?? false,
    width: width || 80,
    height: height || 25,
  };
}

export function execRoutes(ctx: PluginContext, manager: InstanceManager, power: PowerControl): RouteDescriptor {
  return {
    ...instancePaths('/{name}/exec'),
    post: {
      body: execBody,
      answers: ['operation'],
      handler: async (req) => {
        const handle = await manager.load(req.project, req.params.name);
        const spec = execSpec(req.body, handle);
        const status = await power.status(handle);
        if (status !== 'Running') throw badRequest(status === 'Frozen' ? 'Instance is frozen' : 'Instance is not running');
        const withSockets = req.body['wait-for-websocket'] === true;
        const record = req.body['record-output'] === true;
        manager.lifecycle('instance-exec', handle, req, { command: spec.command });

        if (withSockets) {
          const names = spec.interactive ? ['0', 'control'] : ['0', '1', '2', 'control'];
          return async(sessionOperation(ctx, req, handle.name, 'Executing command', names, async (sockets, op) => {
            const session = await handle.driver.exec(handle.inst, spec);
            // Cancelled or shut down: nothing of it may outlive the operation.
            whenAborted(op.signal, () => session.terminate());
            // The client is gone when its control socket closes, or (without one) a socket it reads from.
            const clientGone = () => session.terminate();
            sockets.onClose('control', clientGone);
            for (const name of spec.interactive ? ['0'] : ['1', '2']) {
              sockets.onClose(name, () => !sockets.get('control') && clientGone());
            }
            sockets.onControl((msg) => {
              if (msg.command === 'window-resize' && msg.args) session.resize(Number(msg.args.width) || spec.width!, Number(msg.args.height) || spec.height!);
              else if (msg.command === 'signal' && Number.isInteger(msg.signal)) session.signal(msg.signal!);
            });
            // End of input ends the command's stdin: a closed pipe, or ^D on its terminal.
            sockets.input('0')!.pipe(session.stdin, () => session.stdin.end());
            for (const name of ['1', '2']) sockets.input(name)?.discard();
            const outputs = spec.interactive
              ? [new SocketOutput(session.stdout, sockets.get('0'))]
              : [new SocketOutput(session.stdout, sockets.get('1')), new SocketOutput(session.stderr!, sockets.get('2'))];
            const code = await session.exited;
            if (!op.signal.aborted) await Promise.all(outputs.map((o) => o.settle(OUTPUT_QUIET_MS)));
            sockets.closeAll();
            return { return: code };
          }));
        }

        return async(ctx.operations.create({
          class: 'task',
          description: 'Executing command',
          project: req.project,
          requestor: req.requestor,
          resources: operationResources(handle.name),
          run: async (op) => {
            if (record) await mkdir(handle.inst.logDir, { recursive: true });
            const session = await handle.driver.exec(handle.inst, { ...spec, interactive: false });
            whenAborted(op.signal, () => session.terminate());
            session.stdin.end();
            if (!record) {
              session.stdout.resume();
              session.stderr?.resume();
              return { return: await session.exited };
            }
            const names = execRecordNames(op.id);
            const written = [
              finished(session.stdout.pipe(createWriteStream(path.join(handle.inst.logDir, names.stdout)))),
              finished(session.stderr!.pipe(createWriteStream(path.join(handle.inst.logDir, names.stderr)))),
            ];
            const code = await session.exited;
            // The record is complete before the operation reports success.
            await Promise.all(written);
            const logUrl = (file: string) => subresourceUrl(req, handle.name, `logs/${file}`);
            return { return: code, output: { 1: logUrl(names.stdout), 2: logUrl(names.stderr) } };
          },
        }));
      },
    },
  };
}
