/**
 * `PUT /1.0/instances` (the state of every instance of a project) in a cluster: each member changes the
 * instances it holds. The member asked changes its own and asks each other member holding instances of
 * the project through an internal route that changes only that member's, and waits for them all.
 */
import { availableParallelism } from 'node:os';
import { async, type ApiRequest, type PluginContext, type RouteDescriptor, type StoredDoc } from '../../sdk/index.js';
import type { InstanceManager } from './manager.js';
import type { PowerAction, PowerControl, PowerOptions } from './power.js';
import type { InstanceRecord } from './record.js';
import { bulkStateBody } from './shape.js';
import { stateBody } from './routes/state.js';
import { runRemote, withProject } from './cluster-move.js';

export const BULK_STATE_PATH = '/internal/cluster/instances-state';

/** Instances a bulk start starts at once (each start is a few processes, CPU-bound). */
const BULK_STARTS_IN_FLIGHT = Math.max(4, 4 * availableParallelism());

/** In a bulk change, instances already in the wanted state are left alone. */
function skipBulk(action: PowerAction, status: string): boolean {
  return (action === 'start' && status === 'Running') || (action === 'stop' && status === 'Stopped')
    || (action === 'freeze' && status !== 'Running') || (action === 'unfreeze' && status !== 'Frozen')
    || (action === 'restart' && status === 'Stopped');
}

/** Change the instances in `stored` (held here); the failures, one message per instance. */
export async function changeHeldInstances(
  manager: InstanceManager, power: PowerControl, req: ApiRequest, action: PowerAction, opts: PowerOptions, stored: StoredDoc<InstanceRecord>[],
): Promise<string[]> {
  const failures: string[] = [];
  // Starts a bounded number at once: a thousand liblxc starts side by side only fight over the CPUs.
  // Other changes all at once: a stop may wait out its grace time, and those waits must overlap.
  const inFlight = action === 'start' ? BULK_STARTS_IN_FLIGHT : stored.length;
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(inFlight, stored.length) }, async () => {
    while (next < stored.length) {
      const s = stored[next++]!;
      await manager.lock.run(`${s.project}/${s.name}`, async () => {
        const handle = await manager.load(s.project, s.name).catch(() => undefined);
        if (!handle) return;
        const status = await power.status(handle);
        if (skipBulk(action, status)) return;
        await power.change(handle, action, opts, req).catch((err: Error) => failures.push(`${s.name}: ${err.message}`));
      });
    }
  }));
  return failures;
}

/** Ask `member` to change the project's instances it holds, and wait for it. */
export function askMemberToChange(ctx: PluginContext, member: string, req: ApiRequest, signal: AbortSignal): Promise<void> {
  return runRemote(ctx, member, 'PUT', withProject(BULK_STATE_PATH, req.project), req.body, 'Changing the state of instances', signal);
}

/** What another member asks of this one: the same change, over the instances held here only. */
export function bulkStateRoute(ctx: PluginContext, manager: InstanceManager, power: PowerControl): RouteDescriptor {
  return {
    path: BULK_STATE_PATH,
    put: {
      access: 'admin',
      description: 'Cluster peers only: change the state of the instances of the project this member holds',
      answers: ['operation'],
      body: bulkStateBody,
      handler: async (req) => {
        const { action, opts } = stateBody(req.body?.state);
        const stored = await manager.localRecords(req.project);
        return async(ctx.operations.create({
          class: 'task', description: 'Changing the state of instances', project: req.project, requestor: req.requestor,
          resources: { instances: stored.map((s) => `/1.0/instances/${s.name}`) },
          run: async () => {
            const failures = await changeHeldInstances(manager, power, req, action, opts, stored);
            if (failures.length) throw new Error(failures.join('; '));
          },
        }));
      },
    },
  };
}
