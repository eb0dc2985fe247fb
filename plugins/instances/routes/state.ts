/** GET/PUT /1.0/instances/{name}/state. */
import { async, badRequest, sync, type PluginContext, type RouteDescriptor } from '../../../sdk/index.js';
import type { InstanceManager } from '../manager.js';
import { POWER_ACTIONS, type PowerAction, type PowerControl, type PowerOptions } from '../power.js';
import { stateView } from '../render.js';
import { instancePaths } from './paths.js';
import { stateChangeBody } from '../shape.js';

/** Parse a state change request (`{action, timeout, force, stateful}`). */
export function stateBody(body: unknown): { action: PowerAction; opts: PowerOptions } {
  if (!body || typeof body !== 'object') throw badRequest('The request needs a state change ("action")');
  const b = body as Record<string, unknown>;
  const action = b.action as PowerAction;
  if (!POWER_ACTIONS.includes(action)) throw badRequest(`Unknown state action "${String(b.action)}"`);
  if (b.stateful === true) throw badRequest('Stateful stop and start need CRIU, which this daemon does not provide');
  const timeout = b.timeout === undefined || b.timeout === null ? -1 : Number(b.timeout);
  if (!Number.isInteger(timeout)) throw badRequest('"timeout" must be a whole number of seconds');
  return { action, opts: { force: b.force === true, timeout } };
}

const DESCRIPTIONS: Record<PowerAction, string> = {
  start: 'Starting instance', stop: 'Stopping instance', restart: 'Restarting instance', freeze: 'Freezing instance', unfreeze: 'Unfreezing instance',
};

export function stateRoutes(ctx: PluginContext, manager: InstanceManager, power: PowerControl): RouteDescriptor {
  return {
    ...instancePaths('/{name}/state'),
    get: {
      handler: async (req) => sync(await stateView(await manager.load(req.project, req.params.name), manager.deps.storage)),
    },
    put: {
      body: stateChangeBody,
      answers: ['operation'],
      handler: async (req) => {
        const { action, opts } = stateBody(req.body);
        const handle = await manager.load(req.project, req.params.name);
        const key = `${handle.project}/${handle.name}`;
        const op = ctx.operations.create({
          class: 'task',
          description: DESCRIPTIONS[action],
          project: req.project,
          requestor: req.requestor,
          // A state change names the instance under /1.0/instances only, as the reference's does.
          resources: { instances: [`/1.0/instances/${handle.name}`] },
          run: () => manager.lock.run(key, async () => {
            await power.change(await manager.load(handle.project, handle.name), action, opts, req);
          }),
        });
        return async(op);
      },
    },
  };
}
