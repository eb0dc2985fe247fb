/**
 * Which member answers a request: the one the route's `locate` names, else the one `?target=` names;
 * this member when that is itself or nobody. A request another member already forwarded is never
 * forwarded again: if it still belongs elsewhere, the members disagree (a move under way) and the
 * caller is told to retry, instead of the request going round.
 */
import { notFound, unavailable, type ApiRequest, type ClusterMemberInfo, type RouteDescriptor } from '../../sdk/index.js';
import type { KernelRequest } from '../http/api-request.js';
import type { KernelClusterView } from './cluster-view.js';

export async function forwardTarget(view: KernelClusterView, locate: RouteDescriptor['locate'], req: KernelRequest): Promise<ClusterMemberInfo | undefined> {
  if (!view.enabled) return undefined;
  // `?target=@<group>` names a cluster group, not a member: only a route's `locate` (placement) can act on it.
  // A read is answered here (`lxc launch --target @g` sends it on its image lookups); a change is refused below.
  const group = req.target?.startsWith('@') && req.method === 'GET';
  const name = locate ? await locate(req as ApiRequest) : group ? undefined : req.target;
  if (name === undefined || name === view.serverName) return undefined;
  if (req.caller.forwardedBy !== undefined) {
    throw unavailable(`Cluster member "${req.caller.forwardedBy}" forwarded this request here, but it belongs to member "${name}"; retry`);
  }
  const member = view.member(name);
  if (!member) throw notFound(`Cluster member "${name}" not found`);
  if (!member.online) throw unavailable(`Cluster member "${name}" is offline`);
  return member;
}
