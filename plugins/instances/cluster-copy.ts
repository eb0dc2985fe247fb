/**
 * A copy whose source instance is held by another cluster member (`lxc copy c1 c2` placed elsewhere):
 * the member holding the source opens a migration source for it, and this member pulls it into the new
 * instance, as the reference copies between its members. The source is the instance (with its snapshots
 * unless `instance_only`) or one snapshot of it (sent alone, as the instance's tree). A refresh copy is
 * made by the member holding the copy it refreshes (refreshOnMember), which asks only for what it lacks,
 * as a refresh between servers does. The new instance's definition comes from the source's record (the shared store
 * has it) as for a local copy; its files and snapshots from the stream.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { ApiError, badRequest, type ApiRequest, type Operation, type PluginContext } from '../../sdk/index.js';
import type { CreateSpec, InstanceManager } from './manager.js';
import type { SnapshotManager } from './snapshots/manager.js';
import { applyCopyOrigin, copyOrigin, type CopyOrigin } from './copy.js';
import { migrationTargetOperation } from './migration/target.js';
import { runRemote, withProject } from './cluster-move.js';
import { remoteLocation } from './location.js';
import { operationResources } from './routes/paths.js';

/** The holder's route that opens the migration source, and what it is asked. */
function sourceRequest(origin: CopyOrigin, instanceOnly: boolean, name: string): { url: string; body: Record<string, unknown> } {
  const base = `/1.0/instances/${encodeURIComponent(origin.handle.name)}`;
  if (origin.snapshot) {
    return { url: withProject(`${base}/snapshots/${encodeURIComponent(origin.snapshot.name)}`, origin.handle.project), body: { migration: true, live: false, name } };
  }
  return { url: withProject(base, origin.handle.project), body: { migration: true, live: false, instance_only: instanceOnly } };
}

export async function copyFromMember(
  ctx: PluginContext, manager: InstanceManager, snapshots: SnapshotManager, req: ApiRequest, spec: CreateSpec, source: Record<string, any>, holder: string,
): Promise<Operation> {
  const origin = await copyOrigin(manager, snapshots, req, source);
  if (origin.refresh) {
    // The refreshed copy's files are where it lives: only that member can bring them up to date.
    const existing = await manager.records.get(req.project, spec.name);
    const elsewhere = remoteLocation(ctx.cluster, existing?.doc);
    if (elsewhere) throw badRequest(`Instance "${spec.name}" lives on cluster member "${elsewhere}"; refresh it there (--target ${elsewhere})`);
  }
  applyCopyOrigin(spec, origin, req.body);
  const member = ctx.cluster.members().find((m) => m.name === holder);
  if (!member?.online) throw new ApiError(503, `Cluster member "${holder}" holding the source instance is offline`);
  // A snapshot goes alone: the new instance has no snapshots.
  const instanceOnly = origin.snapshot !== undefined || source.instance_only === true || source.container_only === true;
  const asking = sourceRequest(origin, instanceOnly, spec.name);
  const asked = await ctx.cluster.request(holder, 'POST', asking.url, asking.body);
  const view = asked.body?.metadata;
  if (asked.status >= 400 || !view?.id) throw new ApiError(asked.status >= 400 && asked.status < 600 ? asked.status as 400 : 500, `Cluster member "${holder}" could not send the source instance: ${asked.body?.error ?? asked.status}`);
  const secrets = view.metadata ?? {};
  // The source's operation waits for a peer within a bound; once ours ended without taking it, end it now.
  const endSource = () => ctx.cluster.request(holder, 'DELETE', `/1.0/operations/${encodeURIComponent(view.id)}`).catch(() => undefined);
  try {
    const certificate = await readFile(path.join(ctx.dataDir, 'server.crt'), 'utf8');
    const op = await migrationTargetOperation(ctx, manager, snapshots, req, spec, {
      type: 'migration', mode: 'pull', operation: `https://${member.address}/1.0/operations/${view.id}`, certificate,
      secrets: { control: secrets.control, fs: secrets.fs }, instance_only: instanceOnly, refresh: origin.refresh,
    });
    op.done().then((ended) => (ended.status === 'Success' ? undefined : endSource()), endSource);
    return op;
  } catch (err) {
    // Refused before the pull started.
    await endSource();
    throw err;
  }
}

/**
 * A refresh copy onto an instance another member holds: its files are there, so that member makes it.
 * The kernel placed the request before its body was read, so the handler hands it on; this member's
 * operation follows the other's and ends as it does.
 */
export function refreshOnMember(ctx: PluginContext, req: ApiRequest, holder: string, name: string): Operation {
  const url = withProject(`/1.0/instances?target=${encodeURIComponent(holder)}`, req.project);
  return ctx.operations.create({
    class: 'task', description: 'Refreshing instance', project: req.project, requestor: req.requestor, resources: operationResources(name),
    run: (op) => runRemote(ctx, holder, 'POST', url, req.body, 'Refreshing the copy', op.signal),
  });
}
