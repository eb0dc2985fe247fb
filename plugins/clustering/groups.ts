/**
 * Cluster groups (`clustering_groups`): named sets of members that `?target=@<group>` places among.
 * A group's own document holds its description; which groups a member is in is kept on the member's
 * record (in the order it joined them, which is the order the reference shows), so removing or renaming
 * a member needs no change here. Every member is in `default` until it is put elsewhere; `default` exists
 * without a document until its description is edited.
 */
import { badRequest, conflict, forbidden, notFound, type ClusterGroups, type Collection, type Store } from '../../sdk/index.js';
import { MEMBERS_COLLECTION } from './membership.js';
import { DEFAULT_GROUP, groupsOf, type MemberRecord } from './member.js';

export const GROUPS_COLLECTION = 'groups';
const DEFAULT_DESCRIPTION = 'Default cluster group';

export interface GroupRecord {
  description: string;
}

/** The wire form, fields in the reference's order. */
export interface GroupView {
  description: string;
  members: string[];
  name: string;
}

/** What PUT may change (also the ETag's content). */
export const editableGroup = (view: GroupView) => ({ description: view.description, members: view.members });

export const groupUrl = (name: string) => `/1.0/cluster/groups/${encodeURIComponent(name)}`;

/**
 * A group name the API can carry: not empty, usable as one URL path segment, and not starting with `@`
 * (`?target=@<group>` is how a group is named where a member name could stand).
 */
export function checkGroupName(name: unknown): string {
  if (typeof name !== 'string' || name === '') throw badRequest('No name provided');
  if (name.length > 63) throw badRequest(`Invalid cluster group name "${name}": at most 63 characters`);
  if (name === '.' || name === '..' || /[\s/\\?#%@]/.test(name) || /[\x00-\x1f\x7f]/.test(name)) {
    throw badRequest(`Invalid cluster group name "${name}": no spaces, "/", "\\", "?", "#", "%" or "@", and not "." or ".."`);
  }
  return name;
}

function checkNames(value: unknown, field: string): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) throw badRequest(`"${field}" must be a list of names`);
  return [...new Set(value as string[])];
}

/** A member's groups after an edit: the ones it keeps stay where they were, new ones follow in the order asked (as the reference shows them). */
export const reorderedGroups = (current: readonly string[], wanted: readonly string[]): string[] =>
  [...current.filter((g) => wanted.includes(g)), ...wanted.filter((g) => !current.includes(g))];

export class GroupStore implements ClusterGroups {
  constructor(private readonly store: Store) {}

  private get records(): Collection<GroupRecord> {
    return this.store.collection<GroupRecord>(GROUPS_COLLECTION);
  }

  /** Every group, `default` first, then by name. */
  async views(): Promise<GroupView[]> {
    const [docs, members] = await Promise.all([this.records.list(''), this.memberDocs(this.store)]);
    const names = [DEFAULT_GROUP, ...docs.map((d) => d.name).filter((n) => n !== DEFAULT_GROUP)];
    return names.map((name) => render(name, docs.find((d) => d.name === name)?.doc, members));
  }

  async view(name: string): Promise<GroupView | undefined> {
    const [doc, members] = await Promise.all([this.records.get('', name), this.memberDocs(this.store)]);
    if (!doc && name !== DEFAULT_GROUP) return undefined;
    return render(name, doc?.doc, members);
  }

  async exists(name: string, store: Store = this.store): Promise<boolean> {
    return name === DEFAULT_GROUP || !!(await store.collection<GroupRecord>(GROUPS_COLLECTION).get('', name));
  }

  async membersOf(group: string): Promise<readonly string[] | undefined> {
    return (await this.view(group))?.members;
  }

  async create(name: string, description: string, members: unknown): Promise<void> {
    checkGroupName(name);
    const wanted = checkNames(members, 'members');
    await this.store.transaction(async (tx) => {
      if (await this.exists(name, tx)) throw conflict(`Cluster group "${name}" already exists`);
      const records = await this.memberDocs(tx);
      for (const m of wanted) if (!records.some((r) => r.name === m)) throw notFound(`Cluster member "${m}" not found`);
      await tx.collection<GroupRecord>(GROUPS_COLLECTION).put('', name, { description }, 0);
      for (const r of records) if (wanted.includes(r.name)) await this.writeGroups(tx, r, [...groupsOf(r.doc), name]);
    });
  }

  /** PUT: the description and exactly these members (PATCH reaches here merged with the current content). */
  async update(name: string, description: unknown, members: unknown): Promise<void> {
    if (typeof description !== 'string' && description !== undefined && description !== null) throw badRequest('"description" must be a string');
    const wanted = checkNames(members, 'members');
    await this.store.transaction(async (tx) => {
      const groups = tx.collection<GroupRecord>(GROUPS_COLLECTION);
      const stored = await groups.get('', name);
      if (!stored && name !== DEFAULT_GROUP) throw notFound('Cluster group not found');
      const records = await this.memberDocs(tx);
      for (const m of wanted) if (!records.some((r) => r.name === m)) throw notFound(`Cluster member "${m}" not found`);
      for (const r of records) {
        const current = groupsOf(r.doc);
        const inGroup = current.includes(name);
        if (wanted.includes(r.name) === inGroup) continue;
        const next = inGroup ? current.filter((g) => g !== name) : [...current, name];
        // The reference lets a group's edit leave a member in no group, which its member edit refuses: refused here too.
        if (next.length === 0) throw badRequest(`Cluster member "${r.name}" would belong to no group: members need to belong to at least one group`);
        await this.writeGroups(tx, r, next);
      }
      await groups.put('', name, { description: typeof description === 'string' ? description : '' }, stored?.rev ?? 0);
    });
  }

  async rename(name: string, newName: unknown): Promise<string> {
    if (name === DEFAULT_GROUP) throw forbidden(`The "${DEFAULT_GROUP}" group cannot be renamed`);
    const to = checkGroupName(newName);
    await this.store.transaction(async (tx) => {
      const groups = tx.collection<GroupRecord>(GROUPS_COLLECTION);
      if (!(await groups.get('', name))) throw notFound('Cluster group not found');
      if (to === name) return;
      if (await this.exists(to, tx)) throw conflict(`Name "${to}" already in use`);
      await groups.rename('', name, '', to);
      for (const r of await this.memberDocs(tx)) {
        const current = groupsOf(r.doc);
        if (current.includes(name)) await this.writeGroups(tx, r, current.map((g) => (g === name ? to : g)));
      }
    });
    return to;
  }

  async delete(name: string): Promise<void> {
    if (name === DEFAULT_GROUP) throw forbidden(`The "${DEFAULT_GROUP}" cluster group cannot be deleted`);
    await this.store.transaction(async (tx) => {
      const groups = tx.collection<GroupRecord>(GROUPS_COLLECTION);
      const stored = await groups.get('', name);
      if (!stored) throw notFound('Cluster group not found');
      const members = (await this.memberDocs(tx)).filter((r) => groupsOf(r.doc).includes(name));
      if (members.length) throw badRequest(`Only empty cluster groups can be removed ("${name}" holds ${members.map((m) => m.name).join(', ')})`);
      await groups.delete('', name, stored.rev);
    });
  }

  /** The groups a member edit asks for, checked: at least one, each existing (the member's order kept). */
  async checkMemberGroups(value: unknown, store: Store = this.store): Promise<string[]> {
    const wanted = checkNames(value, 'groups');
    if (wanted.length === 0) throw badRequest('Cluster members need to belong to at least one group');
    for (const g of wanted) if (!(await this.exists(g, store))) throw notFound(`Cluster group "${g}" not found`);
    return wanted;
  }

  private async memberDocs(store: Store): Promise<{ name: string; doc: MemberRecord; rev: number }[]> {
    return (await store.collection<MemberRecord>(MEMBERS_COLLECTION).list('')).map((r) => ({ name: r.name, doc: r.doc, rev: r.rev }));
  }

  private async writeGroups(tx: Store, record: { name: string; doc: MemberRecord; rev: number }, groups: string[]): Promise<void> {
    await tx.collection<MemberRecord>(MEMBERS_COLLECTION).put('', record.name, { ...record.doc, groups }, record.rev);
  }
}

function render(name: string, doc: GroupRecord | undefined, members: { name: string; doc: MemberRecord }[]): GroupView {
  return {
    description: doc ? doc.description : name === DEFAULT_GROUP ? DEFAULT_DESCRIPTION : '',
    members: members.filter((m) => groupsOf(m.doc).includes(name)).map((m) => m.name),
    name,
  };
}
