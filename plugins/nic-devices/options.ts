/**
 * The options of `nic` devices per `nictype` (or `network`), and their checks. Syntax is checked
 * everywhere; that a parent interface exists is checked for instances (not profiles), from sysfs.
 */
import { existsSync } from 'node:fs';
import { COMMON_NIC_OPTIONS, isBool, isUint, type DeviceConfig, type DeviceValidationContext } from '../../sdk/index.js';
import type { NicTypes } from './nic-types.js';
import { addressList, checkBitRate, checkIpv4, checkIpv6, checkRoutes } from './addresses.js';
import { checkHwaddr, checkInterfaceName } from './names.js';

/** The nictypes this plugin registers itself. */
export type BuiltinNicType = 'bridged' | 'macvlan' | 'p2p' | 'routed' | 'physical';

const LIMITS = ['limits.ingress', 'limits.egress', 'limits.max'];

/** Options of each built-in nictype besides COMMON_NIC_OPTIONS. */
export const OPTIONS: Record<BuiltinNicType, string[]> = {
  bridged: ['parent', 'network', 'host_name', 'ipv4.address', 'ipv6.address', 'ipv4.routes', 'ipv6.routes',
    'security.mac_filtering', 'security.ipv4_filtering', 'security.ipv6_filtering', 'security.port_isolation', 'vlan', 'vlan.tagged', ...LIMITS],
  macvlan: ['parent', 'network', 'vlan', 'mode', 'gvrp'],
  p2p: ['host_name', 'ipv4.routes', 'ipv6.routes', ...LIMITS],
  routed: ['parent', 'host_name', 'vlan', 'ipv4.address', 'ipv6.address', 'ipv4.gateway', 'ipv6.gateway',
    'ipv4.host_address', 'ipv6.host_address', 'ipv4.host_table', 'ipv6.host_table', 'ipv4.neighbor_probe', 'ipv6.neighbor_probe', ...LIMITS],
  physical: ['parent', 'network', 'vlan', 'gvrp'],
};

/** Types this host cannot offer, with the reason given to the client. */
const REFUSED: Record<string, string> = {
  ipvlan: 'needs the ipvlan kernel module, which this host does not have',
  sriov: 'needs SR-IOV capable hardware, which this host does not have',
  ovn: 'needs OVN and the openvswitch kernel module, which this host does not have',
};

export const hostInterfaceExists = (name: string) => existsSync(`/sys/class/net/${name}`);
export const isBridge = (name: string) => existsSync(`/sys/class/net/${name}/bridge`);
/** Kernels built without bridge VLAN filtering show no such file. */
export const hasVlanFiltering = (bridge: string) => existsSync(`/sys/class/net/${bridge}/bridge/vlan_filtering`);
export const VLAN_FILTERING_MISSING = '"vlan" and "vlan.tagged" are not supported here: this kernel has no bridge VLAN filtering';

function checkVlan(value: string): void {
  if (!/^\d+$/.test(value) || Number(value) > 4094) throw new Error(`invalid VLAN ID "${value}" (0 to 4094)`);
}

/**
 * What every NIC shares: `network` or `nictype`, a nictype this build has, option names the
 * type knows, and the common options' values; then the type's own checks.
 */
export function checkNic(config: DeviceConfig, ctx: DeviceValidationContext, types: NicTypes): void {
  const network = config.network;
  const nictype = config.nictype;
  if (network && nictype) throw new Error('"network" and "nictype" cannot be used together');
  if (!network && !nictype) throw new Error('missing "nictype" (or "network")');
  if (nictype && REFUSED[nictype]) throw new Error(`nictype "${nictype}" is not supported here: it ${REFUSED[nictype]}`);
  // With `network` the network decides the parent; the options are those of a bridged NIC (its
  // most common type), checked again against the network's own type at start.
  const type = types.get(nictype ?? 'bridged');
  if (!type) {
    if (types.availability(nictype!) === 'not-enabled') throw new Error(`nictype "${nictype}" is not enabled in this build`);
    throw new Error(`unknown nictype "${nictype}"`);
  }
  const known: readonly string[] = [...COMMON_NIC_OPTIONS, ...type.options];
  for (const key of Object.keys(config)) {
    if (key === 'type' || key === 'nictype' || key.startsWith('user.')) continue;
    if (!known.includes(key) || (key === 'network' && nictype)) throw new Error(`option "${key}" is not valid for ${nictype ? `nictype "${nictype}"` : 'a NIC on a network'}`);
  }
  if (network && config.parent) throw new Error('"parent" cannot be used with "network": the network decides it');

  const check = checker(config);
  check('name', (v) => checkInterfaceName('"name"', v));
  check('hwaddr', checkHwaddr);
  check('mtu', (v) => {
    if (!/^\d+$/.test(v) || Number(v) < 68 || Number(v) > 65535) throw new Error(`invalid MTU "${v}" (68 to 65535)`);
  });
  // Only virtual machines boot from a NIC; on a container the value is checked and kept, as the reference does.
  check('boot.priority', isUint);
  type.validate?.(config, ctx);
}

const checker = (config: DeviceConfig) => (key: string, fn: (v: string) => void) => {
  const v = config[key];
  if (v !== undefined) fn(v);
};

/** The value checks of the built-in nictypes (a NIC on a network is checked as `bridged`). */
export function checkBuiltinNic(config: DeviceConfig, ctx: DeviceValidationContext): void {
  const network = config.network;
  const type = (config.nictype as BuiltinNicType) ?? 'bridged';
  const check = checker(config);
  check('host_name', (v) => checkInterfaceName('"host_name"', v));
  check('vlan', checkVlan);
  check('vlan.tagged', (v) => v.split(',').forEach((x) => checkVlan(x.trim())));
  for (const flag of ['security.mac_filtering', 'security.ipv4_filtering', 'security.ipv6_filtering', 'security.port_isolation', 'gvrp', 'ipv4.neighbor_probe', 'ipv6.neighbor_probe']) check(flag, isBool);
  for (const l of LIMITS) check(l, checkBitRate);
  check('mode', (v) => {
    if (v !== 'bridge') throw new Error(`macvlan mode "${v}" is not supported (only "bridge")`);
  });
  check('ipv4.routes', (v) => checkRoutes(v, 4));
  check('ipv6.routes', (v) => checkRoutes(v, 6));
  check('ipv4.host_address', checkIpv4);
  check('ipv6.host_address', checkIpv6);
  check('ipv4.host_table', isUint);
  check('ipv6.host_table', isUint);
  for (const fam of ['ipv4', 'ipv6'] as const) {
    check(`${fam}.gateway`, (v) => {
      if (v !== 'auto' && v !== 'none') throw new Error(`"${fam}.gateway" must be "auto" or "none"`);
    });
    check(`${fam}.address`, (v) => {
      const list = addressList(v);
      if (type !== 'routed' && list.length > 1) throw new Error(`"${fam}.address" takes one address for nictype "${type}"`);
      list.forEach(fam === 'ipv4' ? checkIpv4 : checkIpv6);
    });
  }
  if (type === 'routed' && config['vlan'] && !config.parent) throw new Error('"vlan" needs a "parent"');
  // Static addresses of a bridged NIC are checked against its parent at start: only a managed
  // bridge network hands them out.
  if (type === 'bridged' && !network && !config.parent) throw new Error('missing "parent" (the bridge)');
  if ((type === 'macvlan' || type === 'physical') && !network && !config.parent) throw new Error('missing "parent"');
  if (!ctx.profile && config.parent) {
    checkInterfaceName('"parent"', config.parent);
    if (!hostInterfaceExists(config.parent)) throw new Error(`parent interface "${config.parent}" does not exist on this host`);
    if (type === 'bridged' && !isBridge(config.parent)) throw new Error(`parent "${config.parent}" is not a bridge`);
    if (type === 'bridged' && (config.vlan || config['vlan.tagged']) && !hasVlanFiltering(config.parent)) throw new Error(VLAN_FILTERING_MISSING);
  }
}
