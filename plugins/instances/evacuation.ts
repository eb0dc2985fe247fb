/**
 * Evacuating a cluster member (InstanceEvacuationRef, called by the clustering plugin on the member
 * named): each instance it holds is stopped in place or moved to the online member with the fewest
 * instances, as its `cluster.evacuate` (or the request's mode) says, with `volatile.evacuate.origin`
 * naming this member. Restoring brings back the moved ones (their holder moves them here) and starts the
 * ones stopped in place that ran before. Instances are handled a few at a time; a failure of one does
 * not stop the others, and the call fails naming every instance that could not be handled.
 */
import {
  badRequest, InstanceEvacuationRef, type EvacuationMode, type EvacuationOptions, type InstanceEvacuation, type PluginContext,
} from '../../sdk/index.js';
import type { InstanceManager } from './manager.js';
import type { PowerControl } from './power.js';
import type { SnapshotManager } from './snapshots/manager.js';
import { moveToMember, runRemote, withProject } from './cluster-move.js';
import { instancesPerMember, leastLoaded } from './placement.js';
import { locationOf } from './location.js';

export const ORIGIN_KEY = 'volatile.evacuate.origin';
const PARALLEL = 4;
const MODES: EvacuationMode[] = ['auto', 'stop', 'migrate'];

export const isEvacuationMode = (v: string): v is EvacuationMode => (MODES as string[]).includes(v);

/** Run `work` over `items`, `PARALLEL` at a time; the names of the failed ones, with why. */
async function each<T>(items: T[], name: (item: T) => string, work: (item: T) => Promise<void>, signal?: AbortSignal): Promise<string[]> {
  const failures: string[] = [];
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++];
      if (signal?.aborted) {
        failures.push(`${name(item)}: cancelled`);
        continue;
      }
      await work(item).catch((err: Error) => failures.push(`${name(item)}: ${err.message}`));
    }
  };
  await Promise.all(Array.from({ length: Math.min(PARALLEL, items.length) }, worker));
  return failures;
}

export function provideEvacuation(ctx: PluginContext, manager: InstanceManager, power: PowerControl, snapshots: SnapshotManager): void {
  const here = () => ctx.cluster.serverName;
  const noSignal = new AbortController().signal;

  const evacuation: InstanceEvacuation = {
    async evacuate(opts: EvacuationOptions = {}) {
      const mode = opts.mode ?? 'auto';
      if (!isEvacuationMode(mode)) throw badRequest(`Unknown evacuation mode "${String(mode)}"`);
      if (!ctx.cluster.enabled) throw badRequest('This server is not clustered');
      const signal = opts.signal ?? noSignal;
      const records = await manager.localRecords();
      // The other members' loads, counted once and kept up to date as instances leave.
      const counts = await instancesPerMember(ctx, manager);
      const others = () => ctx.cluster.members().filter((m) => m.name !== here());
      const failures = await each(records, (s) => s.name, async (stored) => {
        let handle = await manager.handleFor(stored);
        const wanted = mode !== 'auto' ? mode : (handle.inst.config['cluster.evacuate'] || 'auto');
        const destination = wanted === 'stop' ? undefined : leastLoaded(others(), counts);
        if (wanted === 'migrate' && !destination) throw new Error('no other cluster member is online to take it');
        await manager.touch(handle.project, handle.name, (record) => {
          record.config[ORIGIN_KEY] = here();
        });
        handle = await manager.load(handle.project, handle.name);
        if (destination) {
          counts.set(destination, (counts.get(destination) ?? 0) + 1);
          opts.progress?.(`Migrating "${handle.name}" to "${destination}"`);
          await moveToMember(ctx, manager, power, snapshots, handle, destination, { signal });
          return;
        }
        opts.progress?.(`Stopping "${handle.name}"`);
        if ((await power.status(handle)) === 'Stopped') return;
        const timeout = Number(handle.inst.config['boot.host_shutdown_timeout'] ?? 30);
        await manager.lock.run(`${handle.project}/${handle.name}`, () => power.stop(handle, { force: false, timeout }, undefined));
        // It ran: restore starts it again.
        await manager.touch(handle.project, handle.name, (record) => {
          record.config['volatile.last_state.power'] = 'RUNNING';
        });
      }, signal);
      if (failures.length) throw new Error(`Failed to evacuate: ${failures.join('; ')}`);
    },

    async restore(opts = {}) {
      if (!ctx.cluster.enabled) throw badRequest('This server is not clustered');
      const signal = opts.signal ?? noSignal;
      const ours = (await manager.records.list()).filter((s) => s.doc.config[ORIGIN_KEY] === here());
      const failures = await each(ours, (s) => s.name, async (stored) => {
        const holder = locationOf(ctx.cluster, stored.doc);
        if (holder !== here()) {
          // The member holding it moves it back (running ones are stopped, moved and started there).
          opts.progress?.(`Migrating "${stored.name}" back from "${holder}"`);
          await runRemote(ctx, holder, 'POST', withProject(`/1.0/instances/${encodeURIComponent(stored.name)}?target=${encodeURIComponent(here())}`, stored.project),
            { migration: true, name: stored.name, live: false }, `Moving "${stored.name}" back`, signal);
        }
        let ran = false;
        await manager.touch(stored.project, stored.name, (record) => {
          ran = holder === here() && record.config['volatile.last_state.power'] === 'RUNNING';
          delete record.config[ORIGIN_KEY];
        });
        if (!ran) return;
        const handle = await manager.load(stored.project, stored.name);
        if ((await power.status(handle)) !== 'Stopped') return;
        opts.progress?.(`Starting "${stored.name}"`);
        await manager.lock.run(`${handle.project}/${handle.name}`, () => power.start(handle));
      }, signal);
      if (failures.length) throw new Error(`Failed to restore: ${failures.join('; ')}`);
    },

    async instancesOn(member) {
      return (await manager.records.list()).filter((s) => s.doc.location === member).map((s) => `${s.project}/${s.name}`);
    },

    async forgetMember(member) {
      for (const s of await manager.records.list()) {
        if (s.doc.location !== member) continue;
        await manager.forgetRecords(s.project, s.name);
        ctx.log.warn({ instance: s.name, project: s.project, member }, 'forgot an instance of a member removed by force');
      }
    },
  };
  ctx.services.provide(InstanceEvacuationRef, evacuation);
}
