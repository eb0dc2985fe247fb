/** The keys of `bridge` networks, each with its check (an empty value unsets and is never checked). */
import { isBool, isUint, oneOf, type ConfigKeyDescriptor } from '../../sdk/index.js';
import { parseCidr, parseIp, type Family } from './cidr.js';

const addressKey = (family: Family) => (value: string): void => {
  if (value === 'auto' || value === 'none') return;
  const c = parseCidr(value);
  if (!c || c.family !== family) throw new Error(`"${value}" is not an IPv${family} address with a prefix length (or auto, none)`);
};

const cidrList = (family: Family) => (value: string): void => {
  for (const part of value.split(',').map((p) => p.trim())) {
    const c = parseCidr(part);
    if (!c || c.family !== family) throw new Error(`"${part}" is not an IPv${family} subnet`);
  }
};

const ipOf = (family: Family) => (value: string): void => {
  const ip = parseIp(value);
  if (!ip || ip.family !== family) throw new Error(`"${value}" is not an IPv${family} address`);
};

const rangeList = (family: Family) => (value: string): void => {
  for (const part of value.split(',').map((p) => p.trim())) {
    const [from, to, extra] = part.split('-');
    const a = from === undefined ? undefined : parseIp(from);
    const b = to === undefined ? undefined : parseIp(to);
    if (extra !== undefined || !a || !b || a.family !== family || b.family !== family || a.value > b.value) {
      throw new Error(`"${part}" is not an IPv${family} range (first-last)`);
    }
  }
};

const isMtu = (value: string): void => {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 68 || n > 65535) throw new Error(`"${value}" is not an MTU (68 to 65535)`);
};

const isMac = (value: string): void => {
  if (!/^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$/.test(value)) throw new Error(`"${value}" is not a MAC address`);
  if (Number.parseInt(value.slice(0, 2), 16) & 1) throw new Error(`"${value}" is a multicast MAC address`);
};

const isExpiry = (value: string): void => {
  if (value !== 'infinite' && !/^\d+[mhdw]?$/.test(value)) throw new Error(`"${value}" is not a lease time (such as 1h, 30m, 3600 or infinite)`);
};

const isDomain = (value: string): void => {
  if (!/^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*$/.test(value) || value.length > 253) {
    throw new Error(`"${value}" is not a DNS domain`);
  }
};

const domainList = (value: string): void => {
  for (const part of value.split(',').map((p) => p.trim())) isDomain(part);
};

const isTtl = (value: string): void => {
  isUint(value);
  if (Number(value) < 1 || Number(value) > 255) throw new Error(`"${value}" is not a TTL (1 to 255)`);
};

export const BRIDGE_KEYS: ConfigKeyDescriptor[] = [
  { key: 'ipv4.address', scope: 'network', type: 'string', default: 'auto', validate: addressKey(4), extension: 'network', doc: 'IPv4 address of the bridge with its prefix length, `auto` (an unused private /24 of this host, set when the network is created) or `none`.' },
  { key: 'ipv6.address', scope: 'network', type: 'string', default: 'auto', validate: addressKey(6), extension: 'network', doc: 'IPv6 address of the bridge with its prefix length, `auto` (an unused ULA /64, set when the network is created) or `none`.' },
  { key: 'ipv4.nat', scope: 'network', type: 'bool', default: 'false', validate: isBool, extension: 'network', doc: 'Masquerade traffic leaving the IPv4 subnet (set to true when the address is generated).' },
  { key: 'ipv6.nat', scope: 'network', type: 'bool', default: 'false', validate: isBool, extension: 'network', doc: 'Masquerade traffic leaving the IPv6 subnet (set to true when the address is generated).' },
  { key: 'ipv4.nat.order', scope: 'network', type: 'string', default: 'before', validate: oneOf('before', 'after'), extension: 'network_nat_order', doc: 'Whether the NAT rules run before or after other source NAT rules of the host.' },
  { key: 'ipv6.nat.order', scope: 'network', type: 'string', default: 'before', validate: oneOf('before', 'after'), extension: 'network_nat_order', doc: 'Whether the NAT rules run before or after other source NAT rules of the host.' },
  { key: 'ipv4.nat.address', scope: 'network', type: 'string', validate: ipOf(4), extension: 'network_nat_address', doc: 'Source address for outbound IPv4 traffic (instead of masquerading behind the outgoing interface).' },
  { key: 'ipv6.nat.address', scope: 'network', type: 'string', validate: ipOf(6), extension: 'network_nat_address', doc: 'Source address for outbound IPv6 traffic (instead of masquerading behind the outgoing interface).' },
  { key: 'ipv4.firewall', scope: 'network', type: 'bool', default: 'true', validate: isBool, extension: 'network_firewall_filtering', doc: 'Add forwarding rules for the bridge\'s IPv4 traffic (NAT and DHCP/DNS rules are added regardless).' },
  { key: 'ipv6.firewall', scope: 'network', type: 'bool', default: 'true', validate: isBool, extension: 'network_firewall_filtering', doc: 'Add forwarding rules for the bridge\'s IPv6 traffic (NAT and DHCP/DNS rules are added regardless).' },
  { key: 'ipv4.routes', scope: 'network', type: 'list', validate: cidrList(4), extension: 'network_routes', doc: 'Comma-separated IPv4 subnets routed to the bridge.' },
  { key: 'ipv6.routes', scope: 'network', type: 'list', validate: cidrList(6), extension: 'network_routes', doc: 'Comma-separated IPv6 subnets routed to the bridge.' },
  { key: 'ipv4.dhcp', scope: 'network', type: 'bool', default: 'true', validate: isBool, extension: 'network', doc: 'Hand out IPv4 addresses with DHCP.' },
  { key: 'ipv6.dhcp', scope: 'network', type: 'bool', default: 'true', validate: isBool, extension: 'network', doc: 'Advertise the IPv6 subnet (router advertisements and stateless DHCPv6).' },
  { key: 'ipv4.dhcp.ranges', scope: 'network', type: 'list', validate: rangeList(4), extension: 'network', doc: 'Comma-separated first-last IPv4 ranges DHCP hands out (default: the whole subnet but the bridge address).' },
  { key: 'ipv4.dhcp.expiry', scope: 'network', type: 'string', default: '1h', validate: isExpiry, extension: 'network_dhcp_expiry', doc: 'How long an IPv4 lease lasts.' },
  { key: 'ipv6.dhcp.expiry', scope: 'network', type: 'string', default: '1h', validate: isExpiry, extension: 'network_dhcp_expiry', doc: 'How long IPv6 addresses advertised by the bridge stay valid.' },
  { key: 'ipv4.dhcp.gateway', scope: 'network', type: 'string', validate: ipOf(4), extension: 'network_dhcp_gateway', doc: 'Gateway DHCP gives clients (default: the bridge address).' },
  { key: 'bridge.hwaddr', scope: 'network', type: 'string', validate: isMac, extension: 'network_hwaddr', doc: 'MAC address of the bridge (default: a stable generated one).' },
  { key: 'bridge.external_interfaces', scope: 'network', type: 'list', extension: 'network', doc: 'Comma-separated host interfaces plugged into the bridge as ports.' },
  { key: 'bridge.mtu', scope: 'network', type: 'integer', default: '1500', validate: isMtu, extension: 'network', doc: 'MTU of the bridge.' },
  { key: 'dns.domain', scope: 'network', type: 'string', default: 'lxd', validate: isDomain, extension: 'network', doc: 'Domain the bridge\'s DNS server answers for and hands to DHCP clients.' },
  { key: 'dns.mode', scope: 'network', type: 'string', default: 'managed', validate: oneOf('managed', 'dynamic', 'none'), extension: 'network', doc: '`managed`: names come from reservations, `dynamic`: clients register the name they send, `none`: no DNS server.' },
  { key: 'dns.search', scope: 'network', type: 'list', validate: domainList, extension: 'network_dns_search', doc: 'Comma-separated search domains DHCP hands to clients (default: dns.domain).' },
  { pattern: /^tunnel\.[^.]+\.protocol$/, scope: 'network', type: 'string', validate: oneOf('vxlan'), extension: 'network', doc: 'Tunnel protocol (vxlan).' },
  { pattern: /^tunnel\.[^.]+\.local$/, scope: 'network', type: 'string', validate: (v) => { if (!parseIp(v)) throw new Error(`"${v}" is not an IP address`); }, extension: 'network', doc: 'Local address of the tunnel.' },
  { pattern: /^tunnel\.[^.]+\.remote$/, scope: 'network', type: 'string', validate: (v) => { if (!parseIp(v)) throw new Error(`"${v}" is not an IP address`); }, extension: 'network', doc: 'Remote address of the tunnel (unicast vxlan).' },
  { pattern: /^tunnel\.[^.]+\.group$/, scope: 'network', type: 'string', validate: (v) => { if (!parseIp(v)) throw new Error(`"${v}" is not an IP address`); }, extension: 'network', doc: 'Multicast group of the tunnel (multicast vxlan; default 239.0.0.1 when no remote is set).' },
  { pattern: /^tunnel\.[^.]+\.id$/, scope: 'network', type: 'integer', validate: (v) => { isUint(v); if (Number(v) > 16777215) throw new Error('a vxlan id is at most 16777215'); }, extension: 'network', doc: 'VXLAN id (VNI) of the tunnel (default 1).' },
  { pattern: /^tunnel\.[^.]+\.port$/, scope: 'network', type: 'integer', validate: (v) => { isUint(v); if (Number(v) > 65535) throw new Error('a port is at most 65535'); }, extension: 'network', doc: 'UDP port of the tunnel (default 0: the kernel default).' },
  { pattern: /^tunnel\.[^.]+\.interface$/, scope: 'network', type: 'string', extension: 'network_vxlan_interface', doc: 'Host interface the vxlan tunnel uses.' },
  { pattern: /^tunnel\.[^.]+\.ttl$/, scope: 'network', type: 'integer', validate: isTtl, extension: 'network_vxlan_ttl', doc: 'TTL of the vxlan tunnel\'s packets (default 1).' },
];
