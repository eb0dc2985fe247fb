/**
 * Which cluster member creates a new instance (`locate` of `POST /1.0/instances`): the one `?target=`
 * names, or the emptiest member of the group `?target=@<group>` names, else the member holding the
 * instance a copy is made from, else the online member with the fewest instances. The kernel forwards
 * the request there, so the member that creates the instance is the one that runs it.
 */
import {
  ApiError, badRequest, notFound, truthy, ClusterGroupsRef, ProjectsServiceRef, type ApiRequest, type ClusterMemberInfo, type PluginContext,
} from '../../sdk/index.js';
import type { InstanceManager } from './manager.js';
import { locationOf } from './location.js';

/**
 * The online, placeable member with the fewest instances; ties go to the member listed first. Undefined
 * when there is none. (Evacuated members and `scheduler.instance=manual` ones take instances by name only.)
 */
export function leastLoaded(members: readonly ClusterMemberInfo[], instancesOn: ReadonlyMap<string, number>, inGroup?: ReadonlySet<string>): string | undefined {
  let best: { name: string; count: number } | undefined;
  for (const m of members) {
    if (!m.online) continue;
    // Within a group, `scheduler.instance=group` members are candidates too; only `manual` and evacuated ones are not.
    if (inGroup ? !inGroup.has(m.name) || m.placeableInGroup === false : m.placeable === false) continue;
    const count = instancesOn.get(m.name) ?? 0;
    if (!best || count < best.count) best = { name: m.name, count };
  }
  return best?.name;
}

/** How many instances each member holds, from the store (every project). */
export async function instancesPerMember(ctx: PluginContext, manager: InstanceManager): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const s of await manager.records.list()) {
    const at = locationOf(ctx.cluster, s.doc);
    counts.set(at, (counts.get(at) ?? 0) + 1);
  }
  return counts;
}

/** A member `?target=` may name: one that exists (404) and is online (400), as the reference refuses them. */
export function checkTarget(ctx: PluginContext, target: string): ClusterMemberInfo {
  const member = ctx.cluster.members().find((m) => m.name === target);
  if (!member) throw notFound(`Cluster member "${target}" not found`);
  if (!member.online) throw badRequest(`Cluster member "${target}" is offline`);
  return member;
}

/**
 * `restricted.cluster.target`: a client restricted to projects may not pick the member in a restricted
 * project unless the project allows it; unrestricted clients (the administrators) always may, as in the reference.
 */
export async function checkTargetAllowed(ctx: PluginContext, req: ApiRequest): Promise<void> {
  if (!req.restrictedTo) return;
  const project = await ctx.services.get(ProjectsServiceRef)?.get(req.project);
  if (!project || !truthy(project.config.restricted)) return;
  const rule = project.config['restricted.cluster.target'] || 'block';
  if (rule !== 'allow') {
    throw new ApiError(403, `Project "${req.project}" doesn't allow choosing the cluster member of an instance (restricted.cluster.target=${rule})`);
  }
}

/**
 * The `target` the project's policy gate judges. In a cluster, placement judged the caller's own `target`
 * on the member that first took the request (placeNewInstance); the one the kernel forwards with is ours.
 */
export const vettedTarget = (ctx: PluginContext, req: ApiRequest): string | undefined => (ctx.cluster.enabled ? undefined : req.target);

/** `?target=@<group>`: the emptiest member of the group that may take instances (400s as the reference's). */
export async function placeInGroup(ctx: PluginContext, manager: InstanceManager, group: string): Promise<string> {
  const members = await ctx.services.get(ClusterGroupsRef)?.membersOf(group);
  if (!members) throw badRequest(`Cluster group "${group}" doesn't exist`);
  const chosen = leastLoaded(ctx.cluster.members(), await instancesPerMember(ctx, manager), new Set(members));
  if (!chosen) throw badRequest('No suitable cluster member could be found');
  return chosen;
}

/** The member a create request goes to (see the file's comment). */
export async function placeNewInstance(ctx: PluginContext, manager: InstanceManager, req: ApiRequest): Promise<string> {
  // A request another member forwarded here was placed there (its caller's target judged there): it is ours.
  if (req.forwardedBy !== undefined) return ctx.cluster.serverName;
  if (req.target) {
    // Judged the same whoever receives it, this member named included (restricted.cluster.target).
    await checkTargetAllowed(ctx, req);
    if (req.target.startsWith('@')) return placeInGroup(ctx, manager, req.target.slice(1));
    return checkTarget(ctx, req.target).name;
  }
  const source = req.body && typeof req.body === 'object' ? (req.body as Record<string, any>).source : undefined;
  if (source && typeof source === 'object' && source.type === 'copy' && typeof source.source === 'string') {
    // A local copy is made where the source's volume is.
    const [instance] = source.source.split('/');
    const stored = await manager.records.get(typeof source.project === 'string' && source.project ? source.project : req.project, instance);
    if (stored) return locationOf(ctx.cluster, stored.doc);
  }
  const members = ctx.cluster.members();
  const chosen = leastLoaded(members, await instancesPerMember(ctx, manager));
  if (!chosen && members.some((m) => m.online)) throw badRequest('No suitable cluster member could be found');
  if (!chosen) throw new ApiError(503, 'No cluster member is online to create the instance on');
  return chosen;
}
