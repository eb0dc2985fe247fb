/**
 * Network ACL records, what changes them, and the bridges they are enforced on. Every change runs
 * under one lock; a change to an ACL in use rewrites the firewall first and stores the record
 * after (putting the old rules back when the write fails), so a refused rule set changes nothing.
 */
import {
  badRequest, KeyedLock, networkUrl, notFound, truthy,
  type Collection, type NetworkInfo, type NetworksService, type PluginContext, type Requestor,
} from '../../sdk/index.js';
import { aclUrl, type AclRecord } from './acl.js';
import type { AclFirewall, BridgeAcls } from './firewall.js';
import { checkAclName } from './names.js';
import { checkAclConfig, checkRules, namedSubjects, splitList } from './rules.js';

export interface AclEdit {
  description: string;
  ingress: unknown;
  egress: unknown;
  config: Record<string, string>;
}

const LOCK = 'network-acls';
const key = (project: string, name: string) => `${project}/${name}`;

export class AclManager {
  readonly records: Collection<AclRecord>;
  private readonly lock = new KeyedLock();
  /** Bridge networks that are up with `security.acls` set, by project/name. */
  private readonly enforced = new Map<string, NetworkInfo>();

  constructor(private readonly ctx: PluginContext, private readonly firewall: AclFirewall, private readonly networks: () => NetworksService | undefined) {
    this.records = ctx.store.collection<AclRecord>('network-acls');
  }

  async get(project: string, name: string) {
    const found = await this.records.get(project, name);
    if (!found) throw notFound('Network ACL not found');
    return found;
  }

  async list(project: string): Promise<AclRecord[]> {
    return (await this.records.list(project)).map((s) => s.doc);
  }

  private async checked(project: string, name: string, edit: AclEdit): Promise<AclRecord> {
    const names = new Set((await this.list(project)).map((a) => a.name));
    names.add(name);
    const exists = (n: string) => names.has(n);
    checkAclConfig(edit.config);
    return { name, description: edit.description, ingress: checkRules('ingress', edit.ingress, exists), egress: checkRules('egress', edit.egress, exists), config: edit.config };
  }

  /** Networks and ACLs that name this ACL. */
  async usedBy(project: string, name: string): Promise<string[]> {
    const out: string[] = [];
    for (const net of (await this.networks()?.list(project)) ?? []) {
      if (splitList(net.config['security.acls']).includes(name)) out.push(networkUrl(net.project, net.name));
    }
    for (const acl of await this.list(project)) {
      if (acl.name !== name && [...acl.ingress, ...acl.egress].some((r) => namedSubjects(r).includes(name))) out.push(aclUrl(project, acl.name));
    }
    return out;
  }

  /** What the firewall should hold, read from the records at the time of the write. */
  private async state(override?: { project: string; acl: AclRecord }): Promise<BridgeAcls[]> {
    const out: BridgeAcls[] = [];
    for (const net of [...this.enforced.values()].sort((a, b) => a.name.localeCompare(b.name))) {
      const acls: AclRecord[] = [];
      for (const name of splitList(net.config['security.acls'])) {
        if (override && override.project === net.project && override.acl.name === name) acls.push(override.acl);
        else {
          const found = await this.records.get(net.project, name);
          if (found) acls.push(found.doc);
        }
      }
      const dflt = (dir: string) => ({
        action: net.config[`security.acls.default.${dir}.action`] || 'reject',
        logged: truthy(net.config[`security.acls.default.${dir}.logged`]),
      });
      out.push({ bridge: net.name, acls, defaults: { ingress: dflt('ingress'), egress: dflt('egress') } });
    }
    return out;
  }

  private rewrite(override?: { project: string; acl: AclRecord }): Promise<void> {
    return this.firewall.apply(() => this.state(override));
  }

  /** A bridge network's ACLs must exist and use only what a bridge can enforce. */
  async checkNetwork(net: NetworkInfo, override?: AclRecord): Promise<void> {
    for (const name of splitList(net.config['security.acls'])) {
      const acl = override?.name === name ? override : (await this.records.get(net.project, name))?.doc;
      if (!acl) throw badRequest(`Network ACL "${name}" does not exist`);
      for (const r of [...acl.ingress, ...acl.egress]) {
        const named = namedSubjects(r);
        if (named.length > 0) throw badRequest(`Network ACL "${name}" refers to "${named[0]}": bridge networks can only enforce rules on addresses, subnets and ranges`);
      }
    }
  }

  /** The networks family: a network is up with this config. */
  async networkApplied(net: NetworkInfo): Promise<void> {
    await this.lock.run(LOCK, async () => {
      const k = key(net.project, net.name);
      const before = this.enforced.get(k);
      if (splitList(net.config['security.acls']).length > 0) this.enforced.set(k, net);
      else if (before) this.enforced.delete(k);
      else return;
      try {
        await this.rewrite();
      } catch (err) {
        if (before) this.enforced.set(k, before);
        else this.enforced.delete(k);
        throw err;
      }
    });
  }

  async networkRemoved(net: NetworkInfo): Promise<void> {
    await this.lock.run(LOCK, async () => {
      if (!this.enforced.delete(key(net.project, net.name))) return;
      await this.rewrite();
    });
  }

  /** Boot: an empty table until the networks family reports the networks it brought up. */
  async reset(): Promise<void> {
    await this.lock.run(LOCK, () => this.rewrite());
  }

  async create(project: string, name: string, edit: AclEdit, requestor?: Requestor): Promise<void> {
    checkAclName(name);
    await this.lock.run(LOCK, async () => {
      if (await this.records.get(project, name)) throw badRequest(`The network ACL "${name}" already exists`);
      const rec = await this.checked(project, name, edit);
      await this.records.put(project, name, rec, 0);
    });
    this.ctx.events.lifecycle('network-acl-created', aclUrl(project, name), { project, requestor });
  }

  async update(project: string, name: string, edit: AclEdit, requestor?: Requestor): Promise<void> {
    await this.lock.run(LOCK, async () => {
      const { rev, doc } = await this.get(project, name);
      const rec = await this.checked(project, name, edit);
      const users = [...this.enforced.values()].filter((n) => n.project === project && splitList(n.config['security.acls']).includes(name));
      for (const net of users) await this.checkNetwork(net, rec);
      if (users.length > 0) await this.rewrite({ project, acl: rec });
      try {
        await this.records.put(project, name, rec, rev);
      } catch (err) {
        if (users.length > 0) await this.rewrite({ project, acl: doc }).catch((undo) => this.ctx.log.error({ err: undo, acl: name }, 'putting ACL rules back failed'));
        throw err;
      }
    });
    this.ctx.events.lifecycle('network-acl-updated', aclUrl(project, name), { project, requestor });
  }

  async rename(project: string, name: string, newName: string, requestor?: Requestor): Promise<void> {
    checkAclName(newName);
    await this.lock.run(LOCK, async () => {
      await this.get(project, name);
      if ((await this.usedBy(project, name)).length > 0) throw badRequest('A network ACL that is in use cannot be renamed');
      if (await this.records.get(project, newName)) throw badRequest(`The network ACL "${newName}" already exists`);
      await this.ctx.store.transaction(async (tx) => {
        const records = tx.collection<AclRecord>('network-acls');
        const moved = await records.rename(project, name, project, newName);
        await records.put(project, newName, { ...moved.doc, name: newName });
      });
    });
    this.ctx.events.lifecycle('network-acl-renamed', aclUrl(project, newName), { project, requestor, context: { old_name: name } });
  }

  async delete(project: string, name: string, requestor?: Requestor): Promise<void> {
    await this.lock.run(LOCK, async () => {
      const { rev } = await this.get(project, name);
      if ((await this.usedBy(project, name)).length > 0) throw badRequest('A network ACL that is in use cannot be deleted');
      await this.records.delete(project, name, rev);
    });
    this.ctx.events.lifecycle('network-acl-deleted', aclUrl(project, name), { project, requestor });
  }
}
