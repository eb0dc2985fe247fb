/**
 * The `nic` device type: what every NIC shares (option names, its name and MAC address inside, the
 * host end left behind), handing the rest to its nictype (the `nic-type` extension point), which
 * declares the interface for the instance driver to make and does the host-side work around it.
 * `network=` resolves through the networks service to a parent and a nictype, and tells the
 * network's driver about the NIC (static DHCP reservations, refusals).
 */
import {
  ApiError, badRequest, NetworksServiceRef, truthy,
  type DeviceConfig, type DeviceRunConfig, type DeviceRunningContext, type DeviceStartContext, type DeviceType,
  type NetworksService, type NicRunConfig, type NicStart, type PluginContext,
} from '../../sdk/index.js';
import { PortFilters } from './filtering.js';
import { HostSide } from './host-side.js';
import { freeEthName, generateHwaddr } from './names.js';
import type { NicTypes } from './nic-types.js';
import { checkNic, hostInterfaceExists } from './options.js';
import { builtinNicTypes } from './types/index.js';

/** A NIC with its network resolved: the nictype and parent interface it ends up with. */
interface Resolved {
  nictype: string;
  parent?: string;
  /** The managed network (in the NIC's project) the NIC attaches to, if any. */
  network?: string;
  /** What the network imposes (macvlan and physical networks); the NIC's own keys come first. */
  vlan?: string;
  gvrp?: boolean;
  mtu?: number;
}

/** The only options of a NIC on a macvlan or physical network: the network decides the rest. */
const ON_PARENT_NETWORK = ['name', 'hwaddr', 'boot.priority', 'network'];
/** Keys such a network sets, refused on its NICs as the reference refuses them. */
const SET_BY_NETWORK = ['parent', 'mtu', 'vlan', 'gvrp', 'maas.subnet.ipv4', 'maas.subnet.ipv6'];

export class NicDevice implements DeviceType {
  readonly type = 'nic';
  readonly hotplug = true;
  private readonly host: HostSide;
  readonly filters: PortFilters;

  constructor(private readonly ctx: PluginContext, private readonly types: NicTypes) {
    this.host = new HostSide(ctx.hostTools);
    this.filters = new PortFilters(ctx.hostTools, ctx.dataDir);
    for (const type of builtinNicTypes({ host: this.host, filters: this.filters, networks: () => this.networks() })) types.register(type);
  }

  private networks(): NetworksService | undefined {
    return this.ctx.services.get(NetworksServiceRef);
  }

  validate(config: DeviceConfig, ctx: Parameters<DeviceType['validate']>[1]): void {
    checkNic(config, ctx, this.types);
  }

  /** The managed network named by `network` (or a managed bridge named by `parent`) must exist and fit. */
  async check(config: DeviceConfig, ctx: Parameters<DeviceType['validate']>[1]): Promise<void> {
    const networks = this.networks();
    if (config.network) {
      if (!networks) throw new Error('"network" needs the networks plugin, which is not enabled in this build');
      const net = await networks.get(ctx.project, config.network).catch((err: Error) => {
        throw new Error(`network "${config.network}": ${err.message}`);
      });
      const nictype = this.types.get(this.types.forNetwork(net.type));
      if (!nictype) throw new Error(`networks of type "${net.type}" cannot be used by NICs here`);
      if (nictype.networkDecides) {
        for (const key of Object.keys(config)) {
          if (key === 'type' || key.startsWith('user.') || ON_PARENT_NETWORK.includes(key)) continue;
          if (SET_BY_NETWORK.includes(key)) throw new Error(`"${key}" cannot be set on a NIC with "network": the ${net.type} network "${net.name}" decides it`);
          throw new Error(`option "${key}" is not valid for a NIC on a ${net.type} network`);
        }
      }
      return;
    }
    await this.types.get(config.nictype)?.check?.(config, ctx);
  }

  /** A MAC address and an interface name as soon as the NIC is added (kept across starts). */
  prepare(ctx: DeviceStartContext): Record<string, string> {
    const c = ctx.config;
    const out: Record<string, string> = {};
    if (!c.hwaddr && !ctx.volatile.hwaddr && !this.types.get(c.nictype)?.keepsHwaddr) out.hwaddr = generateHwaddr();
    if (!c.name && !ctx.volatile.name) out.name = freeEthName(ctx.takenNicNames ?? []);
    return out;
  }

  private async resolve(ctx: DeviceStartContext): Promise<Resolved> {
    const c = ctx.config;
    const networks = this.networks();
    if (c.network) {
      if (!networks) throw badRequest(`Device "${ctx.name}": "network" needs the networks plugin, which is not enabled in this build`);
      const net = await networks.get(ctx.project, c.network);
      const nictype = this.types.forNetwork(net.type);
      if (!nictype) throw badRequest(`Device "${ctx.name}": networks of type "${net.type}" cannot be used by NICs here`);
      const settings = await networks.nicSettings(ctx.project, c.network);
      return { nictype, network: c.network, ...settings };
    }
    const nictype = c.nictype!;
    // A bridged NIC whose parent is a managed bridge is on that network (the older way to say it).
    if (nictype === 'bridged' && networks && c.parent) {
      const net = await networks.get(ctx.project, c.parent).catch(() => undefined);
      if (net?.type === 'bridge') return { nictype, parent: await networks.parentInterface(ctx.project, c.parent), network: c.parent };
    }
    return { nictype, parent: c.parent };
  }

  async start(ctx: DeviceStartContext): Promise<DeviceRunConfig> {
    const c = ctx.config;
    const r = await this.resolve(ctx);
    const type = this.types.get(r.nictype);
    if (!type) throw badRequest(`Device "${ctx.name}": nictype "${r.nictype}" is not enabled in this build`);
    if (r.parent !== undefined && !hostInterfaceExists(r.parent)) throw badRequest(`Device "${ctx.name}": parent interface "${r.parent}" does not exist on this host`);
    const volatile: Record<string, string> = {};
    const name = c.name || ctx.volatile.name || freeEthName(ctx.takenNicNames ?? []);
    if (ctx.takenNicNames?.includes(name)) throw badRequest(`Device "${ctx.name}": another NIC of the instance is already named "${name}"`);
    if (!c.name && ctx.volatile.name !== name) volatile.name = name;
    const hwaddr = c.hwaddr || ctx.volatile.hwaddr || generateHwaddr();
    if (!c.hwaddr && ctx.volatile.hwaddr !== hwaddr) volatile.hwaddr = hwaddr;
    const mtu = c.mtu ? Number(c.mtu) : r.mtu;
    const nic: NicRunConfig = { name, kind: 'veth', hwaddr, mtu };
    const start: NicStart = {
      ...ctx, parent: r.parent, network: r.network, vlan: c.vlan || r.vlan, gvrp: c.gvrp !== undefined ? truthy(c.gvrp) : r.gvrp === true,
      mtu, nic, changes: volatile,
    };
    await type.start(start);
    return { nics: [nic], volatile };
  }

  /** What start and started did on the host for this NIC, by its nictype (a NIC on a network: its network's). */
  async started(ctx: DeviceRunningContext): Promise<void> {
    const used = await this.usedParent(ctx);
    await this.types.get(used.nictype)?.started?.(ctx);
  }

  /**
   * The interface a macvlan or physical NIC used, with its VLAN (`<parent>.<vlan>`): its own
   * `parent`, or what its network says now (a network in use keeps its parent).
   */
  private async usedParent(ctx: DeviceStartContext): Promise<{ nictype?: string; parent?: string }> {
    const c = ctx.config;
    const networks = this.networks();
    if (!c.network || !networks) return { nictype: c.nictype, parent: c.parent && c.vlan ? `${c.parent}.${c.vlan}` : c.parent };
    const net = await networks.get(ctx.project, c.network).catch(() => undefined);
    const settings = net && await networks.nicSettings(ctx.project, c.network).catch(() => undefined);
    if (!net || !settings) return {};
    return { nictype: this.types.forNetwork(net.type), parent: settings.vlan ? `${settings.parent}.${settings.vlan}` : settings.parent };
  }

  async stop(ctx: DeviceStartContext): Promise<Record<string, string>> {
    const c = ctx.config;
    const v = ctx.volatile;
    const out: Record<string, string> = {};
    const hostName = v.host_name;
    if (hostName) {
      await this.filters.remove(hostName).catch(() => undefined);
      // A veth host end normally dies with the instance's end; one left behind is removed.
      if (hostInterfaceExists(hostName)) await this.host.deleteLink(hostName);
      out.host_name = '';
    }
    const used = await this.usedParent(ctx);
    const parent = used.parent;
    Object.assign(out, await this.types.get(used.nictype)?.stop?.({ ...ctx, parent }));
    if (v['last_state.created'] === 'true' && parent) {
      await this.host.deleteLink(parent);
      out['last_state.created'] = '';
    }
    const networks = this.networks();
    if (networks && (c.network || (c.nictype === 'bridged' && c.parent))) {
      const network = c.network || c.parent!;
      const net = await networks.get(ctx.project, network).catch(() => undefined);
      if (net && (c.network || net.type === 'bridge')) {
        await networks.nicUnplugged(ctx.project, network, {
          project: ctx.project, instance: ctx.instanceName, device: ctx.name, hwaddr: c.hwaddr || v.hwaddr || '',
          ipv4: c['ipv4.address'] || undefined, ipv6: c['ipv6.address'] || undefined, hostName,
        }).catch((err: unknown) => {
          if (!(err instanceof ApiError)) throw err;
        });
      }
    }
    return out;
  }
}
