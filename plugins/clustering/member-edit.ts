/** Changes to one member: its writable fields (PUT/PATCH), its name (POST) and its state (evacuate/restore). */
import { badRequest, conflict, notFound, stringMap, type ApiRequest } from '../../sdk/index.js';
import { requireClustered, requireControl, type Clustering } from './context.js';
import { nameOrRefusal } from './enable.js';
import { MEMBERS_COLLECTION } from './membership.js';
import { reorderedGroups } from './groups.js';
import { ASSIGNABLE_ROLES, DATABASE_ROLES, DatabaseRole, groupsOf, memberUrl, type MemberRecord, type MemberView } from './member.js';

/** Member config keys (`clustering_config`): the scheduler's and user keys. */
function checkMemberConfig(config: Record<string, string>): void {
  for (const [key, value] of Object.entries(config)) {
    if (key.startsWith('user.')) continue;
    if (key === 'scheduler.instance') {
      if (!['all', 'manual', 'group'].includes(value)) throw badRequest(`Invalid value for "scheduler.instance": "${value}" (all, manual or group)`);
      continue;
    }
    throw badRequest(`Invalid cluster member configuration key "${key}"`);
  }
}

export async function updateMember(c: Clustering, req: ApiRequest, name: string, current: MemberView, body: Record<string, any>): Promise<void> {
  const stored = await c.membership.get(name);
  if (!stored) throw notFound('Cluster member not found');
  const roles: string[] = body.roles ?? current.roles;
  if (!Array.isArray(roles) || !roles.every((r) => typeof r === 'string')) throw badRequest('"roles" must be a list of strings');
  // Database roles follow etcd: a body may repeat them, never change them. Leadership is only shown: a
  // body may leave it out (the reference takes `roles: [database]` from its leader).
  for (const role of DATABASE_ROLES.filter((r) => r !== DatabaseRole.leader)) {
    if (current.roles.includes(role) && !roles.includes(role)) throw badRequest(`The "${role}" role cannot be dropped at this time`);
    if (!current.roles.includes(role) && roles.includes(role)) throw badRequest(`The "${role}" role cannot be added at this time`);
  }
  const assigned = roles.filter((r) => !DATABASE_ROLES.includes(r));
  for (const role of assigned) if (!ASSIGNABLE_ROLES.includes(role)) throw badRequest(`Invalid cluster role "${role}"`);
  // As in the reference, a body without groups is refused (lxc always sends them).
  const groups = reorderedGroups(groupsOf(stored.doc), await c.groups.checkMemberGroups(body.groups));
  // `lxc cluster unset` sends the key with an empty value: the key goes.
  const config = Object.fromEntries(Object.entries(body.config === undefined ? current.config : stringMap(body.config, 'config')).filter(([, v]) => v !== ''));
  checkMemberConfig(config);
  const next: MemberRecord = {
    ...stored.doc,
    description: typeof body.description === 'string' ? body.description : stored.doc.description,
    failure_domain: typeof body.failure_domain === 'string' && body.failure_domain ? body.failure_domain : 'default',
    config,
    roles: [...new Set(assigned)],
    groups,
  };
  // The groups are read again in the write's transaction: a group deleted meanwhile makes one of the two retry.
  await c.store.transaction(async (tx) => {
    await c.groups.checkMemberGroups(groups, tx);
    await tx.collection<MemberRecord>(MEMBERS_COLLECTION).put('', name, next, stored.rev);
  });
  // Placement here follows the edit (scheduler.instance) at once; other members follow the change feed.
  await c.membership.publish();
  c.events.lifecycle('cluster-member-updated', memberUrl(name), { requestor: req.requestor });
}

export async function renameMember(c: Clustering, req: ApiRequest, name: string, newNameGiven: unknown): Promise<void> {
  requireClustered(c);
  const control = requireControl(c);
  const newName = nameOrRefusal(typeof newNameGiven === 'string' ? newNameGiven : '');
  const stored = await c.membership.get(name);
  if (!stored) throw notFound('Cluster member not found');
  if (newName === name) return;
  if (await c.membership.get(newName)) throw conflict(`The cluster already has a member with name: ${newName}`);
  // The record carries its name too: moved and rewritten in one step.
  await c.store.transaction(async (tx) => {
    const records = tx.collection<MemberRecord>(MEMBERS_COLLECTION);
    const moved = await records.rename('', name, '', newName);
    await records.put('', newName, { ...moved.doc, name: newName }, moved.rev);
  });
  // The renamed member follows when it sees its record change (followRename); this one at once.
  if (name === c.cluster.serverName) await followOwnName(c, control, newName);
  c.events.lifecycle('cluster-member-renamed', memberUrl(newName), { requestor: req.requestor, context: { old_name: name } });
}

/** This member's record now carries `name`: take it as the server's name and hold the lease under it. */
export async function followOwnName(c: Clustering, control: ReturnType<typeof requireControl>, name: string): Promise<void> {
  if (c.cluster.serverName === name) return;
  control.rename(name);
  await c.membership.start(name);
}

export async function changeState(c: Clustering, req: ApiRequest, name: string, action: unknown): Promise<{ record: MemberRecord; description: string } | undefined> {
  requireClustered(c);
  if (action !== 'evacuate' && action !== 'restore') throw badRequest(`Unknown action "${String(action)}"`);
  const stored = await c.membership.get(name);
  if (!stored) throw notFound('Cluster member not found');
  if (action === 'evacuate' && stored.doc.state === 'evacuated') throw badRequest('Cluster member is already evacuated');
  if (action === 'restore' && stored.doc.state !== 'evacuated') throw badRequest('Cluster member is not evacuated');
  const record: MemberRecord = { ...stored.doc, state: action === 'evacuate' ? 'evacuated' : 'normal' };
  await c.membership.records.put('', name, record, stored.rev);
  c.events.lifecycle(action === 'evacuate' ? 'cluster-member-evacuated' : 'cluster-member-restored', memberUrl(name), { requestor: req.requestor });
  return { record, description: action === 'evacuate' ? 'Evacuating cluster member' : 'Restoring cluster member' };
}
