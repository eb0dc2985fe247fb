/**
 * Network types that describe a host interface instead of making one (macvlan, physical, later
 * sriov) share their keys and checks: the `parent` interface, its `mtu`, `vlan` and `gvrp`, and
 * the MAAS subnets. One place, so the types cannot drift apart.
 */
import { existsSync } from 'node:fs';
import type { ConfigKeyDescriptor } from '../../config-keys.js';
import { badRequest } from '../../errors.js';
import type { NetworkInfo } from '../../network.js';
import { isBool } from '../../validate.js';

const interfaceName = (value: string): void => {
  if (value.length > 15 || /[\s/:]/.test(value) || value === '.' || value === '..') throw new Error(`"${value}" is not a host interface name`);
};

/** The range the reference accepts for these networks (IPv6 needs 1280; jumbo frames stop at 16k). */
const parentMtu = (value: string): void => {
  if (!/^\d+$/.test(value)) throw new Error(`"${value}" is not an MTU`);
  if (Number(value) < 1280 || Number(value) > 16384) throw new Error(`MTU ${value} is out of range (1280 to 16384)`);
};

const vlanId = (value: string): void => {
  if (!/^\d+$/.test(value)) throw new Error(`"${value}" is not a VLAN ID`);
  if (Number(value) > 4094) throw new Error(`VLAN ID ${value} is out of range (0 to 4094)`);
};

/** The keys of a network on a parent interface; `extension` is the type's own extension name. */
export function parentNetworkKeys(extension: string): ConfigKeyDescriptor[] {
  return [
    { key: 'parent', scope: 'network', type: 'string', validate: interfaceName, extension, doc: 'Host interface the network\'s NICs use (required).' },
    { key: 'mtu', scope: 'network', type: 'integer', validate: parentMtu, extension, doc: 'MTU of the NICs on the network (1280 to 16384).' },
    { key: 'vlan', scope: 'network', type: 'integer', validate: vlanId, extension, doc: 'VLAN ID the network\'s traffic goes on (a VLAN interface on the parent).' },
    { key: 'gvrp', scope: 'network', type: 'bool', default: 'false', validate: isBool, extension: 'network_gvrp', doc: 'Register the VLAN with GARP VLAN Registration Protocol (has an effect with `vlan` only; kept and checked where the host has no 802.1Q support).' },
    { key: 'maas.subnet.ipv4', scope: 'network', type: 'string', extension, doc: 'MAAS IPv4 subnet to register NICs in (kept; this build has no MAAS controller).' },
    { key: 'maas.subnet.ipv6', scope: 'network', type: 'string', extension, doc: 'MAAS IPv6 subnet to register NICs in (kept; this build has no MAAS controller).' },
  ];
}

export const hostInterfacePresent = (name: string): boolean => name !== '' && !name.includes('/') && existsSync(`/sys/class/net/${name}`);

/** `parent` is required and must be an interface of this host. */
export function checkParent(net: NetworkInfo): string {
  const parent = net.config.parent ?? '';
  if (parent === '') throw badRequest(`Network "${net.name}" needs a "parent" interface`);
  if (!hostInterfacePresent(parent)) throw badRequest(`Parent interface "${parent}" does not exist on this host`);
  return parent;
}

/** `<parent>.<vlan>` interfaces cannot be made without the kernel's 802.1Q support. */
export const NO_8021Q = 'the host has no 802.1Q VLAN support (the 8021q kernel module is missing)';
