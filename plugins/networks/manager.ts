/**
 * Managed network records and what changes them. Every change runs under one lock: automatic
 * subnets are picked against the other networks, so two creations must not pick at once. Creation
 * brings the network up first and writes the record last (a failed start has already undone
 * itself; a failed write takes the network down again), so an error leaves nothing behind.
 */
import {
  badRequest, KeyedLock, notFound, networkUrl,
  type Collection, type NetworkDriver, type NetworkInfo, type NetworkPolicy, type PluginContext, type Requestor, type UsedByRegistry,
} from '../../sdk/index.js';
import type { NetworkDriverTable } from './drivers.js';
import { hostInterfaceExists } from './host-interfaces.js';
import { checkNetworkName } from './names.js';
import { isMemberKey, networkInfo, type NetworkRecord, type NetworkStatus } from './network.js';
import { clusterStatus, MemberParts, type MemberPart } from '../../sdk/lib/cluster/index.js';

export interface NetworkEdit {
  description: string;
  config: Record<string, string>;
}

const UNAVAILABLE_WARNING = 'Network unavailable';
const LOCK = 'networks';

export class NetworkManager {
  readonly records: Collection<NetworkRecord>;
  private readonly lock = new KeyedLock();
  private readonly unavailable = new Map<string, string>();
  private availabilityChanges = 0;
  /** What this host runs of each network (`project/name`): the `previous` of the next change a cluster edit brings. */
  private readonly running = new Map<string, NetworkInfo>();
  /** Plugins following network changes (ACLs, forwards), in registration order. */
  readonly policies: NetworkPolicy[] = [];

  constructor(
    private readonly ctx: PluginContext,
    readonly drivers: NetworkDriverTable,
    readonly usedBy: UsedByRegistry,
  ) {
    this.records = ctx.store.collection<NetworkRecord>('networks');
    this.parts = new MemberParts<NetworkRecord>({
      cluster: ctx.cluster,
      records: this.records,
      collection: 'networks',
      onChange: (listener) => ctx.store.onChange(listener),
      what: 'Network',
      entity: 'network',
      isMemberKey,
      // An uplink is the member's own business; a bridge without one needs nothing from a joiner.
      joinKeys: (rec) => (rec.type === 'bridge' ? [] : ['parent']),
      log: ctx.log,
      make: (project, rec, part) => this.lock.run(LOCK, () => this.makePart(project, rec, part)),
      apply: (project, rec) => this.lock.run(LOCK, () => this.applyPart(project, rec)),
      remove: (project, rec) => this.lock.run(LOCK, () => this.removeLocal(project, rec)),
      changed: (project, name, part) => {
        if (part?.state === 'Created') this.markAvailable(`${project}/${name}`);
      },
    });
  }

  /** A cluster's networks: defined and made member by member. */
  readonly parts: MemberParts<NetworkRecord>;

  /** This member's name in a cluster; undefined standalone (records then hold every key). */
  private member(): string | undefined {
    return this.ctx.cluster.enabled ? this.ctx.cluster.serverName : undefined;
  }

  /** The network as this server's host uses it. */
  info(project: string, rec: NetworkRecord): NetworkInfo {
    return networkInfo(project, rec, this.member());
  }

  /** Bring this member's part of a cluster's network up (the shared keys were settled by the member that created it). */
  private async makePart(project: string, rec: NetworkRecord, part: MemberPart): Promise<Record<string, string>> {
    const driver = this.driverOf(rec);
    const net = networkInfo(project, { ...rec, members: { [this.ctx.cluster.serverName]: part } }, this.ctx.cluster.serverName);
    const others = await this.others({ project, name: rec.name });
    await driver.validate(net, others);
    await driver.start(net);
    try {
      await this.applyPolicies(net);
    } catch (err) {
      await this.undo(driver, net, 'stop');
      throw err;
    }
    this.running.set(`${project}/${rec.name}`, net);
    return part.config;
  }

  /** Bring this member's part in line with the record after a cluster-wide edit; a failure puts the host back. */
  private async applyPart(project: string, rec: NetworkRecord): Promise<void> {
    const driver = this.driverOf(rec);
    const next = this.info(project, rec);
    const previous = this.running.get(`${project}/${rec.name}`) ?? next;
    await driver.validate(next, await this.others({ project, name: rec.name }));
    await this.checkPolicies(next);
    await this.changeHost(driver, previous, next);
    this.running.set(`${project}/${rec.name}`, next);
  }

  /** Change the host from `previous` to `next`, all or nothing. */
  private async changeHost(driver: NetworkDriver, previous: NetworkInfo, next: NetworkInfo): Promise<void> {
    try {
      await driver.update(previous, next);
      await this.applyPolicies(next, previous);
    } catch (err) {
      // Part of the change may be in place: put the host back the way it was.
      await driver.update(next, previous).catch((undo) => this.ctx.log.error({ err: undo, network: next.name }, 'undoing a network update failed'));
      throw err;
    }
  }

  private async removeLocal(project: string, rec: NetworkRecord): Promise<void> {
    const driver = this.driverOf(rec);
    const net = this.info(project, rec);
    for (const p of this.policies) await p.removed?.(net);
    await driver.stop(net);
    await driver.delete(net);
    this.markAvailable(`${project}/${rec.name}`);
    this.running.delete(`${project}/${rec.name}`);
  }

  async find(project: string, name: string) {
    return this.records.get(project, name);
  }

  async get(project: string, name: string) {
    const found = await this.records.get(project, name);
    if (!found) throw notFound('Network not found');
    return found;
  }

  async list(project?: string): Promise<NetworkInfo[]> {
    const member = this.member();
    // A cluster's network this member has no part of yet is not on this host.
    const here = (await this.records.list(project)).filter((s) => member === undefined || s.doc.members?.[member]?.state === 'Created');
    return here.map((s) => networkInfo(s.project, s.doc, member));
  }

  private markAvailable(key: string): void {
    if (this.unavailable.delete(key)) this.availabilityChanges++;
  }

  private markUnavailable(key: string, reason: string): void {
    this.unavailable.set(key, reason);
    this.availabilityChanges++;
  }

  /** Changes with every network found unavailable or available again (what status() shows beside the records). */
  statusRevision(): number {
    return this.availabilityChanges;
  }

  status(project: string, name: string, rec?: NetworkRecord): NetworkStatus {
    if (this.unavailable.has(`${project}/${name}`)) return 'Unavailable';
    return rec?.members ? clusterStatus(rec) : 'Created';
  }

  /** The driver of an existing network: 400 when its type is not enabled in this build. */
  driverOf(rec: NetworkRecord): NetworkDriver {
    const driver = this.drivers.get(rec.type);
    if (!driver) throw badRequest(`Network "${rec.name}" is unavailable: network type "${rec.type}" is not enabled in this build`);
    return driver;
  }

  /** Every other managed network, whatever its project (subnets and interface names are host-wide). */
  private async others(except?: { project: string; name: string }): Promise<NetworkInfo[]> {
    return (await this.list()).filter((n) => !(except && n.project === except.project && n.name === except.name));
  }

  private async checkFreeName(project: string, name: string): Promise<void> {
    if ((await this.list()).some((n) => n.name === name)) {
      throw badRequest(`The network "${name}" already exists${(await this.find(project, name)) ? '' : ' in another project'}`);
    }
    if (hostInterfaceExists(name)) throw badRequest(`The name "${name}" is already used by a host network interface`);
  }

  /** `target`: in a cluster, define only that member's part (the kernel forwarded the request to it). */
  async create(project: string, body: NetworkRecord, requestor?: Requestor, target?: string): Promise<void> {
    const name = checkNetworkName(body.name);
    const driver = this.drivers.require(body.type);
    if (project !== 'default' && !driver.projects) throw badRequest(`Network type "${body.type}" cannot be used in a project other than "default"`);
    if (this.member() !== undefined) {
      await this.createInCluster(project, { ...body, name }, driver, target);
      if (!target) this.ctx.events.lifecycle('network-created', networkUrl(project, name), { project, requestor });
      return;
    }
    this.drivers.validate(body.type, body.config);
    await this.lock.run(LOCK, async () => {
      await this.checkFreeName(project, name);
      const net: NetworkInfo = { project, name, type: body.type, description: body.description, config: { ...body.config } };
      const others = await this.others();
      await driver.fillDefaults?.(net, others, 'create');
      for (const [key, value] of Object.entries(net.config)) if (value === '') delete net.config[key];
      this.drivers.validate(net.type, net.config);
      await driver.validate(net, others);
      await this.checkPolicies(net);
      await driver.start(net);
      try {
        await this.applyPolicies(net);
        try {
          await this.records.put(project, name, { name, type: net.type, description: net.description, config: net.config }, 0);
        } catch (err) {
          for (const p of this.policies) await p.removed?.(net).catch(() => undefined);
          throw err;
        }
      } catch (err) {
        await this.undo(driver, net, 'stop');
        throw err;
      }
    });
    this.ctx.events.lifecycle('network-created', networkUrl(project, name), { project, requestor });
  }

  private async createInCluster(project: string, body: NetworkRecord, driver: NetworkDriver, target: string | undefined): Promise<void> {
    const same = (defined: NetworkRecord) => {
      if (defined.type !== body.type) throw badRequest(`Network "${body.name}" is defined with type "${defined.type}", not "${body.type}"`);
    };
    if (target) {
      await this.parts.define(project, body, same);
      return;
    }
    // Shared keys ("auto" subnets) are settled once, here, against this member's view of the others.
    const net: NetworkInfo = { project, name: body.name, type: body.type, description: body.description, config: { ...body.config } };
    await this.lock.run(LOCK, async () => {
      await driver.fillDefaults?.(net, await this.others({ project, name: body.name }), 'create');
    });
    for (const [key, value] of Object.entries(net.config)) if (value === '') delete net.config[key];
    this.drivers.validate(net.type, net.config);
    await this.parts.createEverywhere(project, { ...body, config: net.config }, same);
  }

  private async checkPolicies(net: NetworkInfo): Promise<void> {
    for (const p of this.policies) await p.check?.(net);
  }

  /** Tell every policy the network is up with `net`; when one fails, the ones before go back to `previous` (or are told it is gone). */
  private async applyPolicies(net: NetworkInfo, previous?: NetworkInfo): Promise<void> {
    const done: NetworkPolicy[] = [];
    try {
      for (const p of this.policies) {
        await p.applied?.(net);
        done.push(p);
      }
    } catch (err) {
      for (const p of done.reverse()) {
        await (previous ? p.applied?.(previous) : p.removed?.(net))
          ?.catch((undo) => this.ctx.log.error({ err: undo, network: net.name }, 'undoing a network policy failed'));
      }
      throw err;
    }
  }

  private async undo(driver: NetworkDriver, net: NetworkInfo, what: 'stop' | 'start'): Promise<void> {
    try {
      if (what === 'stop') {
        await driver.stop(net);
        await driver.delete(net);
      } else {
        await driver.start(net);
      }
    } catch (err) {
      this.ctx.log.error({ err, network: net.name }, `undoing a network change failed (${what})`);
    }
  }

  /**
   * In a cluster, without `target` the shared keys change on every member; with it (the kernel forwarded
   * the request to that member) only that member's own keys change, on its host alone.
   */
  async update(project: string, name: string, edit: NetworkEdit, requestor?: Requestor, target?: string): Promise<void> {
    const found = await this.get(project, name);
    if (found.doc.members) {
      this.driverOf(found.doc);
      if (target) await this.updateOwnPart(project, name, edit);
      else await this.updateShared(project, found, edit);
      this.ctx.events.lifecycle('network-updated', networkUrl(project, name), { project, requestor });
      return;
    }
    await this.lock.run(LOCK, async () => {
      const { rev, doc } = await this.get(project, name);
      const driver = this.driverOf(doc);
      const config = { ...edit.config };
      for (const [key, value] of Object.entries(config)) if (value === '') delete config[key];
      this.drivers.validate(doc.type, config);
      const previous = networkInfo(project, doc);
      const next: NetworkInfo = { ...previous, description: edit.description, config };
      const others = await this.others({ project, name });
      await driver.fillDefaults?.(next, others, 'update');
      await driver.validate(next, others);
      await this.checkPolicies(next);
      await this.changeHost(driver, previous, next);
      try {
        await this.records.put(project, name, { ...doc, description: edit.description, config: next.config }, rev);
      } catch (err) {
        await this.changeHost(driver, next, previous).catch((undo) => this.ctx.log.error({ err: undo, network: name }, 'undoing a network update failed'));
        throw err;
      }
    });
    this.ctx.events.lifecycle('network-updated', networkUrl(project, name), { project, requestor });
  }

  /** The shared keys of a cluster's network, settled here ("auto" addresses) and applied by every member. */
  private async updateShared(project: string, { rev, doc }: { rev: number; doc: NetworkRecord }, edit: NetworkEdit): Promise<void> {
    const name = doc.name;
    const driver = this.driverOf(doc);
    const config = this.parts.sharedKeysOf(edit.config);
    this.drivers.validate(doc.type, config);
    // Checked as this member's host would use it (its own keys merged), as the reference does.
    const next = this.info(project, { ...doc, description: edit.description, config });
    await this.lock.run(LOCK, async () => {
      const others = await this.others({ project, name });
      await driver.fillDefaults?.(next, others, 'update');
      await driver.validate(next, others);
      await this.checkPolicies(next);
    });
    const shared = Object.fromEntries(Object.entries(next.config).filter(([key]) => !isMemberKey(key)));
    await this.parts.editEverywhere(project, name, { description: edit.description, config: shared }, rev);
  }

  /** `--target`: this member's own keys of a cluster's network; the shared ones must be left as they are. */
  private async updateOwnPart(project: string, name: string, edit: NetworkEdit): Promise<void> {
    const self = this.ctx.cluster.serverName;
    await this.lock.run(LOCK, async () => {
      const { rev, doc } = await this.get(project, name);
      const driver = this.driverOf(doc);
      const part = doc.members?.[self];
      if (!part) throw badRequest(`Network "${name}" is not defined on member "${self}"`);
      const own = this.parts.ownKeysOf(doc, edit.config);
      const record: NetworkRecord = { ...doc, members: { ...doc.members, [self]: { ...part, config: own } } };
      if (part.state !== 'Created') {
        // Not made on this host yet (pending, or failed): the keys are what its making will use.
        this.drivers.validate(doc.type, own);
        await this.records.put(project, name, record, rev);
        return;
      }
      const previous = this.info(project, doc);
      const next = this.info(project, record);
      this.drivers.validate(doc.type, next.config);
      await driver.validate(next, await this.others({ project, name }));
      await this.checkPolicies(next);
      await this.changeHost(driver, previous, next);
      try {
        await this.records.put(project, name, record, rev);
      } catch (err) {
        await this.changeHost(driver, next, previous).catch((undo) => this.ctx.log.error({ err: undo, network: name }, 'undoing a network update failed'));
        throw err;
      }
      this.running.set(`${project}/${name}`, next);
    });
  }

  /** The reference renames no network of a cluster (each member's bridge would have to follow). */
  checkRenamable(): void {
    if (this.member() !== undefined) throw badRequest('Renaming a cluster\'s network is not supported');
  }

  async rename(project: string, name: string, newName: string, requestor?: Requestor): Promise<void> {
    checkNetworkName(newName);
    await this.lock.run(LOCK, async () => {
      const { doc } = await this.get(project, name);
      const driver = this.driverOf(doc);
      this.checkRenamable();
      if ((await this.usedBy.collect(project, name)).length > 0) throw badRequest('A network that is in use cannot be renamed');
      await this.checkFreeName(project, newName);
      const before = networkInfo(project, doc);
      const after = { ...before, name: newName };
      await driver.stop(before);
      try {
        await driver.rename?.(before, newName);
        try {
          await driver.start(after);
          try {
            await this.records.rename(project, name, project, newName);
            await this.records.put(project, newName, { ...doc, name: newName });
          } catch (err) {
            await driver.stop(after).catch(() => undefined);
            throw err;
          }
        } catch (err) {
          await driver.rename?.(after, name).catch(() => undefined);
          throw err;
        }
      } catch (err) {
        await this.undo(driver, before, 'start');
        throw err;
      }
      this.markAvailable(`${project}/${name}`);
      // The network is renamed: what policies keep follows it (a failure here is reported, not undone).
      for (const p of this.policies) await p.removed?.(before, newName).catch((err) => this.ctx.log.error({ err, network: name }, 'network policy rename failed'));
      await this.applyPolicies(after).catch((err) => this.ctx.log.error({ err, network: newName }, 'network policy rename failed'));
    });
    this.ctx.events.lifecycle('network-renamed', networkUrl(project, newName), { project, requestor, context: { old_name: name } });
  }

  async delete(project: string, name: string, requestor?: Requestor): Promise<void> {
    const found = await this.get(project, name);
    if (found.doc.members) {
      this.driverOf(found.doc);
      if ((await this.usedBy.collect(project, name)).length > 0) throw badRequest('The network is currently in use');
      // Each member removes its part under its own lock (MemberParts.remove).
      await this.parts.deleteEverywhere(project, name);
    } else {
      await this.lock.run(LOCK, async () => {
        const { rev, doc } = await this.get(project, name);
        this.driverOf(doc);
        if ((await this.usedBy.collect(project, name)).length > 0) throw badRequest('The network is currently in use');
        await this.removeLocal(project, doc);
        await this.records.delete(project, name, rev);
      });
    }
    await this.ctx.warnings.resolve(UNAVAILABLE_WARNING, networkUrl(project, name));
    this.ctx.events.lifecycle('network-deleted', networkUrl(project, name), { project, requestor });
  }

  /** Boot: remove leftovers, then bring every network up; one that cannot be is reported unavailable. */
  async startAll(): Promise<void> {
    // A cluster's networks this member has not made yet are made by MemberParts.
    const member = this.member();
    if (member !== undefined) {
      for (const { project, name, doc } of await this.records.list()) {
        if (doc.members?.[member] && doc.members[member]!.state !== 'Created') await this.parts.reconcile(project, name).catch(() => undefined);
      }
    }
    const nets = await this.list();
    for (const driver of this.drivers.all()) {
      if (!driver.cleanup) continue;
      await driver.cleanup.leftovers(nets.filter((n) => n.type === driver.type)).catch((err) => this.ctx.log.error({ err, type: driver.type }, 'network leftover cleanup failed'));
    }
    await this.lock.run(LOCK, async () => {
      for (const net of nets) {
        const url = networkUrl(net.project, net.name);
        const driver = this.drivers.get(net.type);
        let reason: string | undefined;
        if (!driver) reason = `network type "${net.type}" is not enabled in this build`;
        else {
          try {
            await driver.start(net);
            await this.applyPolicies(net);
          } catch (err) {
            reason = (err as Error).message;
          }
        }
        if (reason === undefined) {
          this.markAvailable(`${net.project}/${net.name}`);
          await this.ctx.warnings.resolve(UNAVAILABLE_WARNING, url);
          continue;
        }
        this.markUnavailable(`${net.project}/${net.name}`, reason);
        this.ctx.log.error({ network: net.name, reason }, 'network unavailable');
        await this.ctx.warnings.raise({ type: UNAVAILABLE_WARNING, message: `Network "${net.name}" is unavailable: ${reason}`, severity: 'high', project: net.project, entityUrl: url });
      }
    });
    for (const driver of this.drivers.all()) driver.lifetime?.watch?.();
    await this.parts.catchUp();
  }

  async shutdown(hostShutdown: boolean): Promise<void> {
    const nets = await this.list();
    await this.lock.run(LOCK, async () => {
      for (const driver of this.drivers.all()) {
        await driver.lifetime?.shutdown(nets.filter((n) => n.type === driver.type), hostShutdown)
          .catch((err) => this.ctx.log.error({ err, type: driver.type }, 'network shutdown failed'));
      }
    });
  }
}
