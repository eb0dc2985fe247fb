/**
 * A copy whose source instance is held by another cluster member (`lxc copy c1 c2` placed elsewhere):
 * the member holding the source opens a migration source for it, and this member pulls it into the new
 * instance, as the reference copies between its members. The new instance's definition comes from the
 * source's record (the shared store has it) as for a local copy; its files and snapshots from the stream.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { ApiError, badRequest, type ApiRequest, type Operation, type PluginContext } from '../../sdk/index.js';
import type { CreateSpec, InstanceManager } from './manager.js';
import type { SnapshotManager } from './snapshots/manager.js';
import { applyCopyOrigin, copyOrigin } from './copy.js';
import { migrationTargetOperation } from './migration/target.js';
import { withProject } from './cluster-move.js';

export async function copyFromMember(
  ctx: PluginContext, manager: InstanceManager, snapshots: SnapshotManager, req: ApiRequest, spec: CreateSpec, source: Record<string, any>, holder: string,
): Promise<Operation> {
  const origin = await copyOrigin(manager, snapshots, req, source);
  if (origin.snapshot) throw badRequest(`Copying a snapshot held by cluster member "${holder}" is not supported yet; copy it there (--target ${holder})`);
  if (origin.refresh) throw badRequest(`A refresh copy from cluster member "${holder}" is not supported yet; refresh it there (--target ${holder})`);
  applyCopyOrigin(spec, origin, req.body);
  const member = ctx.cluster.members().find((m) => m.name === holder);
  if (!member?.online) throw new ApiError(503, `Cluster member "${holder}" holding the source instance is offline`);
  const instanceOnly = source.instance_only === true || source.container_only === true;
  const asked = await ctx.cluster.request(holder, 'POST', withProject(`/1.0/instances/${encodeURIComponent(origin.handle.name)}`, origin.handle.project), { migration: true, live: false, instance_only: instanceOnly });
  const view = asked.body?.metadata;
  if (asked.status >= 400 || !view?.id) throw new ApiError(asked.status >= 400 && asked.status < 600 ? asked.status as 400 : 500, `Cluster member "${holder}" could not send the source instance: ${asked.body?.error ?? asked.status}`);
  const secrets = view.metadata ?? {};
  try {
    const certificate = await readFile(path.join(ctx.dataDir, 'server.crt'), 'utf8');
    return await migrationTargetOperation(ctx, manager, snapshots, req, spec, {
      type: 'migration', mode: 'pull', operation: `https://${member.address}/1.0/operations/${view.id}`, certificate,
      secrets: { control: secrets.control, fs: secrets.fs }, instance_only: instanceOnly,
    });
  } catch (err) {
    // Refused before the pull started: the source's operation would otherwise wait for its bound.
    await ctx.cluster.request(holder, 'DELETE', `/1.0/operations/${encodeURIComponent(view.id)}`).catch(() => undefined);
    throw err;
  }
}
