/**
 * The `nic` device type: what interface each nictype gives the instance (declared for the
 * instance driver to make) and the host-side work around it. `network=` resolves through the
 * networks service to a parent and a nictype, and tells the network's driver about the NIC
 * (static DHCP reservations, refusals).
 */
import { readFileSync } from 'node:fs';
import {
  ApiError, badRequest, NetworksServiceRef, truthy,
  type DeviceConfig, type DeviceRunConfig, type DeviceRunningContext, type DeviceStartContext, type DeviceType,
  type NetworksService, type NicRunConfig, type PluginContext,
} from '../../sdk/index.js';
import { addressList } from './addresses.js';
import { PortFilters } from './filtering.js';
import { HostSide } from './host-side.js';
import { freeEthName, generateHostName, generateHwaddr } from './names.js';
import { checkNic, hostInterfaceExists, isBridge, type NicType } from './options.js';

/** A NIC with its network resolved: the nictype and parent interface it ends up with. */
interface Resolved {
  nictype: NicType;
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

const NETWORK_NICTYPE: Record<string, NicType> = { bridge: 'bridged', macvlan: 'macvlan', physical: 'physical' };

const readSys = (iface: string, file: string) => {
  try {
    return readFileSync(`/sys/class/net/${iface}/${file}`, 'utf8').trim();
  } catch {
    return undefined;
  }
};

export class NicDevice implements DeviceType {
  readonly type = 'nic';
  readonly hotplug = true;
  private readonly host: HostSide;
  readonly filters: PortFilters;

  constructor(private readonly ctx: PluginContext) {
    this.host = new HostSide(ctx.hostTools);
    this.filters = new PortFilters(ctx.hostTools, ctx.dataDir);
  }

  private networks(): NetworksService | undefined {
    return this.ctx.services.get(NetworksServiceRef);
  }

  validate(config: DeviceConfig, ctx: Parameters<DeviceType['validate']>[1]): void {
    checkNic(config, ctx);
  }

  /** The managed network named by `network` (or a managed bridge named by `parent`) must exist and fit. */
  async check(config: DeviceConfig, ctx: Parameters<DeviceType['validate']>[1]): Promise<void> {
    const networks = this.networks();
    if (config.network) {
      if (!networks) throw new Error('"network" needs the networks plugin, which is not enabled in this build');
      const net = await networks.get(ctx.project, config.network).catch((err: Error) => {
        throw new Error(`network "${config.network}": ${err.message}`);
      });
      if (!NETWORK_NICTYPE[net.type]) throw new Error(`networks of type "${net.type}" cannot be used by NICs here`);
      if (net.type === 'macvlan' || net.type === 'physical') {
        for (const key of Object.keys(config)) {
          if (key === 'type' || key.startsWith('user.') || ON_PARENT_NETWORK.includes(key)) continue;
          if (SET_BY_NETWORK.includes(key)) throw new Error(`"${key}" cannot be set on a NIC with "network": the ${net.type} network "${net.name}" decides it`);
          throw new Error(`option "${key}" is not valid for a NIC on a ${net.type} network`);
        }
      }
      return;
    }
    if (config.nictype === 'bridged' && (config['ipv4.address'] || config['ipv6.address'])) {
      const net = config.parent && networks ? await networks.get(ctx.project, config.parent).catch(() => undefined) : undefined;
      if (net?.type !== 'bridge') throw new Error(`static addresses need a managed bridge network as the parent ("${config.parent}" is not one)`);
    }
  }

  /** A MAC address and an interface name as soon as the NIC is added (kept across starts). */
  prepare(ctx: DeviceStartContext): Record<string, string> {
    const c = ctx.config;
    const out: Record<string, string> = {};
    if (!c.hwaddr && !ctx.volatile.hwaddr && c.nictype !== 'physical') out.hwaddr = generateHwaddr();
    if (!c.name && !ctx.volatile.name) out.name = freeEthName(ctx.takenNicNames ?? []);
    return out;
  }

  private async resolve(ctx: DeviceStartContext): Promise<Resolved> {
    const c = ctx.config;
    const networks = this.networks();
    if (c.network) {
      if (!networks) throw badRequest(`Device "${ctx.name}": "network" needs the networks plugin, which is not enabled in this build`);
      const net = await networks.get(ctx.project, c.network);
      const nictype = NETWORK_NICTYPE[net.type];
      if (!nictype) throw badRequest(`Device "${ctx.name}": networks of type "${net.type}" cannot be used by NICs here`);
      const settings = await networks.nicSettings(ctx.project, c.network);
      return { nictype, network: c.network, ...settings };
    }
    const nictype = c.nictype as NicType;
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
    if (r.parent !== undefined && !hostInterfaceExists(r.parent)) throw badRequest(`Device "${ctx.name}": parent interface "${r.parent}" does not exist on this host`);
    if (r.nictype === 'bridged' && !isBridge(r.parent!)) throw badRequest(`Device "${ctx.name}": parent "${r.parent}" is not a bridge`);
    if (r.nictype === 'bridged' && !r.network && (c['ipv4.address'] || c['ipv6.address'])) {
      throw badRequest(`Device "${ctx.name}": static addresses need a managed bridge network as the parent ("${r.parent}" is not one)`);
    }
    if ((truthy(c['security.ipv4_filtering']) || truthy(c['security.ipv6_filtering'])) && !r.network) {
      throw badRequest(`Device "${ctx.name}": IP filtering needs a managed bridge network as the parent`);
    }
    const volatile: Record<string, string> = {};
    const name = c.name || ctx.volatile.name || freeEthName(ctx.takenNicNames ?? []);
    if (ctx.takenNicNames?.includes(name)) throw badRequest(`Device "${ctx.name}": another NIC of the instance is already named "${name}"`);
    if (!c.name && ctx.volatile.name !== name) volatile.name = name;
    const hwaddr = c.hwaddr || ctx.volatile.hwaddr || generateHwaddr();
    if (!c.hwaddr && ctx.volatile.hwaddr !== hwaddr) volatile.hwaddr = hwaddr;
    const mtu = c.mtu ? Number(c.mtu) : r.mtu;
    const vlan = c.vlan || r.vlan;
    const gvrp = c.gvrp !== undefined ? truthy(c.gvrp) : r.gvrp === true;
    const nic: NicRunConfig = { name, kind: 'veth', hwaddr, mtu };

    switch (r.nictype) {
      case 'bridged':
      case 'p2p':
      case 'routed': {
        const hostName = c.host_name || generateHostName();
        if (hostInterfaceExists(hostName)) throw badRequest(`Device "${ctx.name}": host interface "${hostName}" already exists`);
        nic.hostName = hostName;
        volatile.host_name = hostName;
        if (r.nictype === 'bridged') {
          nic.link = r.parent;
          if (!mtu) nic.mtu = Number(readSys(r.parent!, 'mtu')) || undefined;
        }
        if (r.nictype === 'routed') {
          nic.ipv4 = addressList(c['ipv4.address']).map((a) => `${a}/32`);
          nic.ipv6 = addressList(c['ipv6.address']).map((a) => `${a}/128`);
          if (nic.ipv4.length && (c['ipv4.gateway'] ?? 'auto') === 'auto') nic.ipv4Gateway = c['ipv4.host_address'] || '169.254.0.1';
          if (nic.ipv6.length && (c['ipv6.gateway'] ?? 'auto') === 'auto') nic.ipv6Gateway = c['ipv6.host_address'] || 'fe80::1';
          if (r.parent && !mtu) nic.mtu = Number(readSys(r.parent, 'mtu')) || undefined;
        }
        break;
      }
      case 'macvlan': {
        let parent = r.parent!;
        if (vlan) {
          const made = await this.host.vlanParent(parent, vlan, gvrp);
          parent = made.name;
          if (made.created) volatile['last_state.created'] = 'true';
        }
        Object.assign(nic, { kind: 'macvlan', link: parent, macvlanMode: 'bridge' });
        break;
      }
      case 'physical': {
        let parent = r.parent!;
        if (vlan) {
          const made = await this.host.vlanParent(parent, vlan, gvrp);
          parent = made.name;
          if (made.created) volatile['last_state.created'] = 'true';
        }
        // The interface keeps its own MAC unless one is asked for; its settings come back at stop.
        delete volatile.hwaddr;
        if (ctx.volatile.hwaddr && !c.hwaddr) volatile.hwaddr = '';
        nic.hwaddr = c.hwaddr || undefined;
        volatile['last_state.hwaddr'] = readSys(parent, 'address') ?? '';
        volatile['last_state.mtu'] = readSys(parent, 'mtu') ?? '';
        Object.assign(nic, { kind: 'phys', link: parent });
        break;
      }
    }
    if (r.network && r.nictype === 'bridged' && this.networks()) {
      await this.networks()!.nicPlugged(ctx.project, r.network, {
        project: ctx.project, instance: ctx.instanceName, device: ctx.name, hwaddr,
        ipv4: c['ipv4.address'] || undefined, ipv6: c['ipv6.address'] || undefined, hostName: nic.hostName,
      });
    }
    return { nics: [nic], volatile };
  }

  async started(ctx: DeviceRunningContext): Promise<void> {
    const c = ctx.config;
    const nic = ctx.run.nics?.[0];
    if (!nic || nic.kind !== 'veth' || !nic.hostName) return;
    const port = nic.hostName;
    if (nic.link) {
      // Bridged: VLANs, isolation and filters on the bridge port.
      await this.host.bridgeVlans(nic.link, port, c.vlan, (c['vlan.tagged'] ?? '').split(',').map((s) => s.trim()).filter(Boolean));
      if (truthy(c['security.port_isolation'])) await this.host.portIsolation(port);
      const v4 = truthy(c['security.ipv4_filtering']) ? addressList(c['ipv4.address']) : undefined;
      const v6 = truthy(c['security.ipv6_filtering']) ? addressList(c['ipv6.address']) : undefined;
      if (truthy(c['security.mac_filtering']) || v4 || v6) {
        await this.filters.apply({ port, hwaddr: nic.hwaddr!, mac: truthy(c['security.mac_filtering']), ipv4: v4, ipv6: v6 });
      }
    }
    await this.host.limits(port, c['limits.ingress'] || c['limits.max'], c['limits.egress'] || c['limits.max']);
    if (c.nictype === 'p2p') {
      await this.host.routes(port, addressList(c['ipv4.routes']), addressList(c['ipv6.routes']));
    }
    if (c.nictype === 'routed') {
      const v4 = addressList(c['ipv4.address']);
      const v6 = addressList(c['ipv6.address']);
      await this.host.addresses(port, v4.length ? c['ipv4.host_address'] || '169.254.0.1' : undefined, v6.length ? c['ipv6.host_address'] || 'fe80::1' : undefined);
      await this.host.routes(port, v4.map((a) => `${a}/32`), v6.map((a) => `${a}/128`), c['ipv4.host_table'], c['ipv6.host_table']);
      if (c.parent) await this.host.proxyNeighbours(c.parent, v4, v6);
    }
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
    return { nictype: NETWORK_NICTYPE[net.type], parent: settings.vlan ? `${settings.parent}.${settings.vlan}` : settings.parent };
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
    if (c.nictype === 'routed') {
      const v4 = addressList(c['ipv4.address']);
      const v6 = addressList(c['ipv6.address']);
      await this.host.removeRoutes(v4.map((a) => `${a}/32`), v6.map((a) => `${a}/128`), c['ipv4.host_table'], c['ipv6.host_table']);
      if (c.parent) await this.host.proxyNeighbours(c.parent, v4, v6, true);
    }
    const used = await this.usedParent(ctx);
    const parent = used.parent;
    if (used.nictype === 'physical' && parent && hostInterfaceExists(parent)) {
      if (v['last_state.mtu']) await this.host.run('ip', ['link', 'set', parent, 'mtu', v['last_state.mtu']], true);
      if (v['last_state.hwaddr']) await this.host.run('ip', ['link', 'set', parent, 'address', v['last_state.hwaddr']], true);
      out['last_state.mtu'] = '';
      out['last_state.hwaddr'] = '';
    }
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
