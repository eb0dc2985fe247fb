/**
 * The `macvlan` network type: a name for a parent interface (and a VLAN and MTU on it) that NICs
 * use with `network=`. Nothing is made on the host for the network itself; each NIC becomes a
 * macvlan interface on the parent when its instance starts.
 */
import { truthy, type NetworkDriver, type NetworkInfo, type NetworkNicSettings } from '../../sdk/index.js';
import { checkParent, parentNetworkKeys } from '../../sdk/lib/network/index.js';

export class MacvlanDriver implements NetworkDriver {
  readonly type = 'macvlan';
  readonly configKeys = parentNetworkKeys('network_type_macvlan');
  readonly projects = false;

  async validate(net: NetworkInfo): Promise<void> {
    checkParent(net);
  }

  async start(): Promise<void> {}
  async stop(): Promise<void> {}
  async update(): Promise<void> {}
  async delete(): Promise<void> {}

  /** The network has no interface of its own (`state` answers 404, as the reference does). */
  interfaceName(net: NetworkInfo): string {
    return net.name;
  }

  nicSettings(net: NetworkInfo): NetworkNicSettings {
    const c = net.config;
    return {
      parent: c.parent ?? '',
      vlan: c.vlan || undefined,
      gvrp: truthy(c.gvrp),
      mtu: c.mtu ? Number(c.mtu) : undefined,
    };
  }
}
