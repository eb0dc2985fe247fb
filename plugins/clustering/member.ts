/** A cluster member as stored (one document per member, shared by every member) and as the API shows it. */
import os from 'node:os';

/** What the cluster keeps about a member; database roles are not stored: they follow etcd. */
export interface MemberRecord {
  name: string;
  /** `host:port` of its cluster address (its `cluster.https_address`, else `core.https_address`). */
  address: string;
  description: string;
  failure_domain: string;
  architecture: string;
  config: Record<string, string>;
  /** Roles a user assigned (database roles are computed, never stored). */
  roles: string[];
  /** Cluster groups it is in, in the order it joined them (groups.ts); absent: `default` only. */
  groups?: string[];
  /** `evacuated` once `POST .../state {"action":"evacuate"}` ran. */
  state: 'normal' | 'evacuated';
  joined_at: string;
}

/** The cluster group every member is in until put elsewhere (groups.ts). */
export const DEFAULT_GROUP = 'default';

/** The groups a member record is in (records made before groups existed are in `default`). */
export const groupsOf = (record: Pick<MemberRecord, 'groups'>): string[] => record.groups ?? [DEFAULT_GROUP];

/** The wire form, fields in the reference's order (`lxc cluster show` prints them so). */
export interface MemberView {
  roles: string[];
  failure_domain: string;
  description: string;
  config: Record<string, string>;
  groups: string[];
  server_name: string;
  url: string;
  database: boolean;
  status: 'Online' | 'Offline' | 'Evacuated';
  message: string;
  architecture: string;
}

/** What `PUT /1.0/cluster/members/<name>` may change. */
export const editable = (view: MemberView) => ({
  roles: view.roles,
  failure_domain: view.failure_domain,
  description: view.description,
  config: view.config,
  groups: view.groups,
});

export const memberUrl = (name: string) => `/1.0/cluster/members/${encodeURIComponent(name)}`;

/** Database roles follow the etcd membership; these names are what the reference shows. */
export const DatabaseRole = {
  voter: 'database',
  leader: 'database-leader',
  standby: 'database-standby',
} as const;
export const DATABASE_ROLES: readonly string[] = Object.values(DatabaseRole);

/** Roles a user may assign in 5.0 (`clustering_edit_roles`); they are recorded, nothing else acts on them yet. */
export const ASSIGNABLE_ROLES: readonly string[] = ['event-hub', 'ovn-chassis'];

/** The architecture name the reference uses for this host (`x86_64`, `aarch64`…). */
export function hostArchitecture(): string {
  return os.machine();
}

/**
 * Member names as the reference accepts them: a host name label (letters, digits and dashes, not at
 * either end), and never "none", the name of a server that is not clustered.
 */
export function checkMemberName(name: unknown): string {
  if (typeof name !== 'string' || name === '') throw new Error('Server name is required');
  if (name.length > 63) throw new Error('Server name must be at most 63 characters');
  if (!/^[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?$/.test(name)) throw new Error(`Invalid server name "${name}": letters, digits and dashes only, not starting or ending with a dash`);
  if (/^\d+$/.test(name)) throw new Error(`Invalid server name "${name}": it cannot be only digits`);
  if (name === 'none') throw new Error('Server name "none" is reserved for servers that are not clustered');
  return name;
}
