/**
 * `lxc move c1 --target m2`: the instance goes to another member of the cluster through the migration
 * the instances family already speaks between servers. This member (the one holding it) opens a
 * migration source; the target member pulls it into a new instance under a temporary name (the shared
 * store already holds the record under the real name); then the original is deleted here and the copy
 * renamed there, so its record names the new member. A running instance is stopped first and started
 * again on the target, as the reference moves it without live migration. A failure before the original
 * is deleted leaves it as it was (restarted when it ran) and removes the copy.
 */
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { ApiError, badRequest, type ApiRequest, type PluginContext } from '../../sdk/index.js';
import type { InstanceHandle } from './access.js';
import type { InstanceManager } from './manager.js';
import type { PowerControl } from './power.js';
import type { SnapshotManager } from './snapshots/manager.js';
import { migrationSourceOperation } from './migration/source.js';
import { checkTarget } from './placement.js';

/** Bound of one wait on the target's operation, asked again until the overall bound. */
const WAIT_STEP_S = 5;
const MOVE_BOUND_MS = 30 * 60_000;

/** Checks that answer before the move starts (400/404), as the reference refuses them. */
export async function checkClusterMove(ctx: PluginContext, manager: InstanceManager, handle: InstanceHandle, member: string, newName: string): Promise<void> {
  if (member === handle.location) throw badRequest("Target must be different than instance's current location");
  checkTarget(ctx, member);
  if (newName !== handle.name) throw badRequest('An instance keeps its name when it moves to another cluster member; rename it before or after');
  const backups = await manager.children.backups?.of(handle);
  if (backups?.length) throw badRequest('Instance has backups');
}

/** What a member answered, as an error when it is one. */
function answered(member: string, what: string, answer: { status: number; body: any }): any {
  if (answer.status >= 400 || answer.body?.type === 'error') {
    const message = answer.body?.error || `HTTP ${answer.status}`;
    throw new ApiError(answer.status >= 400 && answer.status < 600 ? answer.status as 400 : 500, `${what} on cluster member "${member}" failed: ${message}`);
  }
  return answer.body?.metadata ?? answer.body;
}

/** Wait for an operation of another member to end; throws with its error when it failed. */
async function waitRemote(ctx: PluginContext, member: string, opId: string, what: string, signal: AbortSignal): Promise<void> {
  const deadline = Date.now() + MOVE_BOUND_MS;
  while (Date.now() < deadline) {
    if (signal.aborted) throw new Error('cancelled');
    const view = answered(member, what, await ctx.cluster.request(member, 'GET', `/1.0/operations/${encodeURIComponent(opId)}/wait?timeout=${WAIT_STEP_S}`));
    if (view?.status === 'Success') return;
    if (view?.status === 'Failure' || view?.status === 'Cancelled') throw new Error(`${what} on cluster member "${member}" failed: ${view.err || view.status}`);
  }
  throw new Error(`${what} on cluster member "${member}" did not finish in time`);
}

/** Start an operation on another member and wait for it. */
export async function runRemote(ctx: PluginContext, member: string, method: string, url: string, body: unknown, what: string, signal: AbortSignal): Promise<void> {
  const op = answered(member, what, await ctx.cluster.request(member, method, url, body));
  if (op?.id) await waitRemote(ctx, member, op.id, what, signal);
}

export const withProject = (url: string, project: string) => (project === 'default' ? url : `${url}${url.includes('?') ? '&' : '?'}project=${encodeURIComponent(project)}`);

/** The move itself, inside the operation the request answered. */
export async function moveToMember(
  ctx: PluginContext, manager: InstanceManager, power: PowerControl, snapshots: SnapshotManager,
  handle: InstanceHandle, member: string, op: { signal: AbortSignal }, req?: ApiRequest,
): Promise<void> {
  const here = ctx.cluster.members().find((m) => m.name === ctx.cluster.serverName);
  if (!here) throw new ApiError(503, 'This member does not know its own cluster address');
  checkTarget(ctx, member);
  const { project, name } = handle;
  let fresh = await manager.load(project, name);
  const wasRunning = (await power.status(fresh)) !== 'Stopped';
  if (wasRunning) {
    await manager.lock.run(`${project}/${name}`, async () => power.stop(await manager.load(project, name), { force: true, timeout: -1 }, req, true));
    fresh = await manager.load(project, name);
  }
  const restartHere = async () => {
    if (wasRunning) await manager.lock.run(`${project}/${name}`, async () => power.start(await manager.load(project, name), req, true)).catch((err) => ctx.log.error({ err, instance: name }, 'restarting the instance after a failed move failed'));
  };
  // The shared store has the record under `name`: the copy arrives under a name of its own.
  const temporary = `move-of-${randomUUID()}`;
  const record = fresh.record;
  const tempUrl = withProject(`/1.0/instances/${temporary}`, project);
  let copied = false;
  let sourceId: string | undefined;
  try {
    const source = await migrationSourceOperation(ctx, manager, power, snapshots, req, fresh, { live: false, instanceOnly: false });
    sourceId = source.id;
    const secrets = source.view().metadata as { control: string; fs: string };
    const certificate = await readFile(path.join(ctx.dataDir, 'server.crt'), 'utf8');
    // Volatile keys of a running instance's devices no longer hold once it stopped.
    const config = Object.fromEntries(Object.entries(record.config).filter(([k]) => !/^volatile\.[^.]+\.host_name$/.test(k)));
    await runRemote(ctx, member, 'POST', withProject(`/1.0/instances?target=${encodeURIComponent(member)}`, project), {
      name: temporary, type: record.type, architecture: record.architecture, config, devices: record.devices, profiles: record.profiles,
      ephemeral: record.ephemeral, description: record.description,
      source: { type: 'migration', mode: 'pull', operation: `https://${here.address}/1.0/operations/${source.id}`, certificate, secrets: { control: secrets.control, fs: secrets.fs } },
    }, 'Receiving the instance', op.signal);
    copied = true;
    await source.done();
    await manager.lock.run(`${project}/${name}`, async () => {
      const now = await manager.load(project, name);
      power.forget(project, name);
      await manager.remove(now, req);
    });
  } catch (err) {
    // A source the target never reached would wait for its bound: end it now.
    if (sourceId && !copied) await ctx.operations.cancel(sourceId).catch(() => undefined);
    if (copied) await runRemote(ctx, member, 'DELETE', tempUrl, undefined, 'Removing the copy', AbortSignal.timeout(60_000)).catch((e) => ctx.log.error({ err: e, instance: temporary }, 'removing the copy of a failed move failed'));
    await restartHere();
    throw err;
  }
  // The original is gone: from here on, the instance lives on the target under its temporary name until renamed.
  await runRemote(ctx, member, 'POST', tempUrl, { name }, 'Renaming the moved instance', op.signal);
  if (wasRunning) await runRemote(ctx, member, 'PUT', withProject(`/1.0/instances/${encodeURIComponent(name)}/state`, project), { action: 'start' }, 'Starting the moved instance', op.signal);
}
