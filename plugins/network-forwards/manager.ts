/**
 * Forward records of networks and what changes them. The rules are rewritten before a record is
 * stored (from the records plus the change) and put back when the write fails, so a forward nftables
 * refuses leaves nothing behind. A forward's listen address is unique across every network.
 */
import {
  badRequest, conflict, KeyedLock, notFound,
  type Collection, type NetworkInfo, type NetworksService, type PluginContext, type Requestor,
} from '../../sdk/index.js';
import { checkConfig, checkListenAddress, checkPorts, parseIp } from './checks.js';
import type { ForwardFirewall } from './firewall.js';
import { forwardKey, forwardUrl, networkPrefix, type ForwardRecord } from './forward.js';

export interface ForwardEdit {
  description: string;
  config: Record<string, string>;
  ports: unknown;
}

const LOCK = 'network-forwards';
/** Network types whose forwards this plugin enforces. */
const TYPES = ['bridge'];

export class ForwardManager {
  readonly records: Collection<ForwardRecord>;
  private readonly lock = new KeyedLock();

  constructor(private readonly ctx: PluginContext, private readonly firewall: ForwardFirewall, private readonly networks: NetworksService) {
    this.records = ctx.store.collection<ForwardRecord>('forwards');
  }

  /** The network a request names, seen from its project: 404 when there is none. */
  async network(project: string, name: string): Promise<NetworkInfo> {
    const net = await this.networks.get(project, name);
    if (!TYPES.includes(net.type)) throw badRequest(`Networks of type "${net.type}" have no forwards`);
    return net;
  }

  async list(net: NetworkInfo): Promise<ForwardRecord[]> {
    return (await this.records.list(net.project, networkPrefix(net.name))).map((s) => s.doc).filter((f) => f.network === net.name);
  }

  async get(net: NetworkInfo, listen: string) {
    const found = await this.records.get(net.project, forwardKey(net.name, listen));
    if (!found) throw notFound('Network forward not found');
    return found;
  }

  private rewrite(change?: { remove?: ForwardRecord; add?: ForwardRecord }): Promise<void> {
    return this.firewall.apply(async () => {
      const all = (await this.records.list()).map((s) => s.doc);
      const same = (a: ForwardRecord, b?: ForwardRecord) => b !== undefined && a.network === b.network && a.listen_address === b.listen_address;
      const kept = all.filter((f) => !same(f, change?.remove) && !same(f, change?.add));
      return change?.add ? [...kept, change.add] : kept;
    });
  }

  private checked(net: NetworkInfo, listen: string, edit: ForwardEdit): ForwardRecord {
    checkConfig(net, listen, edit.config);
    const config = Object.fromEntries(Object.entries(edit.config).filter(([, v]) => v !== ''));
    return { network: net.name, listen_address: listen, description: edit.description, config, ports: checkPorts(net, listen, edit.ports) };
  }

  async create(net: NetworkInfo, listen: unknown, edit: ForwardEdit, requestor?: Requestor): Promise<string> {
    const address = checkListenAddress(listen);
    await this.lock.run(LOCK, async () => {
      const canonical = parseIp(address)!;
      for (const s of await this.records.list()) {
        const other = parseIp(s.doc.listen_address);
        if (other?.family !== canonical.family || other.value !== canonical.value) continue;
        if (s.project === net.project && s.doc.network === net.name) throw conflict('A forward for that listen address already exists');
        throw badRequest(`Listen address "${address}" is used by a forward of network "${s.doc.network}"`);
      }
      const rec = this.checked(net, address, edit);
      await this.rewrite({ add: rec });
      try {
        await this.records.put(net.project, forwardKey(net.name, address), rec, 0);
      } catch (err) {
        await this.rewrite().catch(() => undefined);
        throw err;
      }
    });
    this.ctx.events.lifecycle('network-forward-created', forwardUrl(net.project, net.name, address), { project: net.project, requestor, context: { network: net.name } });
    return address;
  }

  async update(net: NetworkInfo, listen: string, edit: ForwardEdit, requestor?: Requestor): Promise<void> {
    await this.lock.run(LOCK, async () => {
      const { rev } = await this.get(net, listen);
      const rec = this.checked(net, listen, edit);
      await this.rewrite({ add: rec });
      try {
        await this.records.put(net.project, forwardKey(net.name, listen), rec, rev);
      } catch (err) {
        await this.rewrite().catch(() => undefined);
        throw err;
      }
    });
    this.ctx.events.lifecycle('network-forward-updated', forwardUrl(net.project, net.name, listen), { project: net.project, requestor, context: { network: net.name } });
  }

  async delete(net: NetworkInfo, listen: string, requestor?: Requestor): Promise<void> {
    await this.lock.run(LOCK, async () => {
      const { rev, doc } = await this.get(net, listen);
      await this.rewrite({ remove: doc });
      try {
        await this.records.delete(net.project, forwardKey(net.name, listen), rev);
      } catch (err) {
        await this.rewrite().catch(() => undefined);
        throw err;
      }
    });
    this.ctx.events.lifecycle('network-forward-deleted', forwardUrl(net.project, net.name, listen), { project: net.project, requestor, context: { network: net.name } });
  }

  /** The networks family: a network is deleted (its forwards go) or renamed (they follow it). */
  async networkRemoved(net: NetworkInfo, renamedTo?: string): Promise<void> {
    await this.lock.run(LOCK, async () => {
      const mine = await this.list(net);
      if (mine.length === 0) return;
      await this.ctx.store.transaction(async (tx) => {
        const records = tx.collection<ForwardRecord>('forwards');
        for (const f of mine) {
          await records.delete(net.project, forwardKey(net.name, f.listen_address));
          if (renamedTo) await records.put(net.project, forwardKey(renamedTo, f.listen_address), { ...f, network: renamedTo });
        }
      });
      await this.rewrite();
    });
  }

  /** Boot: the rules of every stored forward (and nothing else). */
  async reset(): Promise<void> {
    await this.lock.run(LOCK, () => this.rewrite());
  }
}
