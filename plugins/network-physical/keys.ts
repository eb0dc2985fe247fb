/**
 * The keys of `physical` networks: those of any parent-interface network, and the ones that only
 * matter when the network is an OVN uplink (gateways, routes, OVN address ranges, ingress mode,
 * name servers). OVN is not in this build: those are checked and kept, so a configuration written
 * for the reference is accepted as it is.
 */
import { isIP } from 'node:net';
import { isBool, oneOf, type ConfigKeyDescriptor } from '../../sdk/index.js';
import { parentNetworkKeys } from '../../sdk/lib/network/index.js';

type Family = 4 | 6;

const hostCidr = (family: Family) => (value: string): void => {
  const [addr, len, extra] = value.split('/');
  const max = family === 4 ? 32 : 128;
  if (extra !== undefined || isIP(addr ?? '') !== family || len === undefined || !/^\d+$/.test(len) || Number(len) > max) {
    throw new Error(`"${value}" is not an IPv${family} address with a prefix length`);
  }
};

const list = (value: string): string[] => value.split(',').map((s) => s.trim());

const cidrList = (family: Family) => (value: string): void => {
  for (const part of list(value)) hostCidr(family)(part);
};

const rangeList = (family: Family) => (value: string): void => {
  for (const part of list(value)) {
    const [from, to, extra] = part.split('-');
    if (extra !== undefined || isIP(from ?? '') !== family || isIP(to ?? '') !== family) throw new Error(`"${part}" is not an IPv${family} range (first-last)`);
  }
};

const addressList = (value: string): void => {
  for (const part of list(value)) if (!isIP(part)) throw new Error(`"${part}" is not an IP address`);
};

const OVN_UPLINK = 'network_type_physical';

export const PHYSICAL_KEYS: ConfigKeyDescriptor[] = [
  ...parentNetworkKeys('network_type_physical'),
  { key: 'ipv4.gateway', scope: 'network', type: 'string', validate: hostCidr(4), extension: OVN_UPLINK, doc: 'OVN uplink: IPv4 gateway address with the subnet\'s prefix length.' },
  { key: 'ipv6.gateway', scope: 'network', type: 'string', validate: hostCidr(6), extension: OVN_UPLINK, doc: 'OVN uplink: IPv6 gateway address with the subnet\'s prefix length.' },
  { key: 'ipv4.routes', scope: 'network', type: 'list', validate: cidrList(4), extension: OVN_UPLINK, doc: 'OVN uplink: comma-separated IPv4 subnets OVN networks may use.' },
  { key: 'ipv6.routes', scope: 'network', type: 'list', validate: cidrList(6), extension: OVN_UPLINK, doc: 'OVN uplink: comma-separated IPv6 subnets OVN networks may use.' },
  { key: 'ipv4.routes.anycast', scope: 'network', type: 'bool', default: 'false', validate: isBool, extension: OVN_UPLINK, doc: 'OVN uplink: let IPv4 routes overlap between networks.' },
  { key: 'ipv6.routes.anycast', scope: 'network', type: 'bool', default: 'false', validate: isBool, extension: OVN_UPLINK, doc: 'OVN uplink: let IPv6 routes overlap between networks.' },
  { key: 'ipv4.ovn.ranges', scope: 'network', type: 'list', validate: rangeList(4), extension: OVN_UPLINK, doc: 'OVN uplink: comma-separated first-last IPv4 ranges for OVN routers.' },
  { key: 'ipv6.ovn.ranges', scope: 'network', type: 'list', validate: rangeList(6), extension: OVN_UPLINK, doc: 'OVN uplink: comma-separated first-last IPv6 ranges for OVN routers.' },
  { key: 'ovn.ingress_mode', scope: 'network', type: 'string', default: 'l2proxy', validate: oneOf('l2proxy', 'routed'), extension: OVN_UPLINK, doc: 'OVN uplink: how OVN NIC addresses are published on the uplink.' },
  { key: 'dns.nameservers', scope: 'network', type: 'list', validate: addressList, extension: OVN_UPLINK, doc: 'OVN uplink: comma-separated DNS servers of the uplink.' },
];
