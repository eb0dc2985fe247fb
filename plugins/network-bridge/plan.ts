/** A bridge network's config turned into what the host should have, with defaults applied once here. */
import { badRequest, truthy, type NetworkInfo } from '../../sdk/index.js';
import { formatIp, lastOf, networkOf, parseCidr, parseIp, type Cidr, type Family } from './cidr.js';

export interface FamilyPlan {
  family: Family;
  /** The bridge's own address with its prefix. */
  cidr: Cidr;
  nat: boolean;
  natAddress?: string;
  natOrder: string;
  firewall: boolean;
  dhcp: boolean;
  expiry: string;
  routes: Cidr[];
}

export interface TunnelPlan {
  name: string;
  /** Host interface name: `<bridge>-<tunnel>`. */
  ifname: string;
  id: number;
  local?: string;
  remote?: string;
  group?: string;
  port: number;
  ttl: number;
  dev?: string;
}

export interface BridgePlan {
  name: string;
  hwaddr: string;
  mtu: number;
  ipv4?: FamilyPlan & { ranges: [string, string][]; gateway?: string };
  ipv6?: FamilyPlan;
  dnsMode: 'managed' | 'dynamic' | 'none';
  domain: string;
  search: string[];
  tunnels: TunnelPlan[];
  externalInterfaces: string[];
}

/** A boolean key; unset or empty means its default. */
const flag = (value: string | undefined, dflt: boolean) => (value === undefined || value === '' ? dflt : truthy(value));

const list = (value: string | undefined) => (value ?? '').split(',').map((s) => s.trim()).filter(Boolean);

function familyPlan(net: NetworkInfo, family: Family): FamilyPlan | undefined {
  const prefix = `ipv${family}`;
  const text = net.config[`${prefix}.address`] ?? '';
  if (text === '' || text === 'none') return undefined;
  const cidr = parseCidr(text);
  if (!cidr || cidr.family !== family) throw badRequest(`Invalid ${prefix}.address "${text}"`);
  return {
    family,
    cidr,
    nat: truthy(net.config[`${prefix}.nat`]),
    natAddress: net.config[`${prefix}.nat.address`] || undefined,
    natOrder: net.config[`${prefix}.nat.order`] || 'before',
    firewall: flag(net.config[`${prefix}.firewall`], true),
    dhcp: flag(net.config[`${prefix}.dhcp`], true),
    expiry: net.config[`${prefix}.dhcp.expiry`] || '1h',
    routes: list(net.config[`${prefix}.routes`]).map((r) => parseCidr(r)!),
  };
}

/** The DHCP range: the subnet without its network, broadcast and bridge addresses at either end. */
function defaultRange(cidr: Cidr): [string, string] {
  let first = networkOf(cidr) + 1n;
  let last = lastOf(cidr) - 1n;
  if (cidr.address === first) first += 1n;
  if (cidr.address === last) last -= 1n;
  return [formatIp(4, first), formatIp(4, last)];
}

function tunnels(net: NetworkInfo): TunnelPlan[] {
  const names = new Set<string>();
  for (const key of Object.keys(net.config)) {
    const m = /^tunnel\.([^.]+)\./.exec(key);
    if (m) names.add(m[1]!);
  }
  return [...names].sort().map((name) => {
    const get = (k: string) => net.config[`tunnel.${name}.${k}`] || undefined;
    return {
      name,
      ifname: `${net.name}-${name}`,
      id: Number(get('id') ?? 1),
      local: get('local'),
      remote: get('remote'),
      group: get('group') ?? (get('remote') ? undefined : '239.0.0.1'),
      port: Number(get('port') ?? 0),
      ttl: Number(get('ttl') ?? 1),
      dev: get('interface'),
    };
  });
}

export function bridgePlan(net: NetworkInfo, defaultHwaddr: string): BridgePlan {
  const ipv4 = familyPlan(net, 4);
  return {
    name: net.name,
    hwaddr: (net.config['bridge.hwaddr'] || defaultHwaddr).toLowerCase(),
    mtu: Number(net.config['bridge.mtu'] || 1500),
    ipv4: ipv4 && {
      ...ipv4,
      ranges: net.config['ipv4.dhcp.ranges']
        ? list(net.config['ipv4.dhcp.ranges']).map((r) => r.split('-') as [string, string])
        : [defaultRange(ipv4.cidr)],
      gateway: net.config['ipv4.dhcp.gateway'] || undefined,
    },
    ipv6: familyPlan(net, 6),
    dnsMode: (net.config['dns.mode'] || 'managed') as BridgePlan['dnsMode'],
    domain: net.config['dns.domain'] || 'lxd',
    search: list(net.config['dns.search']),
    tunnels: tunnels(net),
    externalInterfaces: list(net.config['bridge.external_interfaces']),
  };
}

/** Whether dnsmasq has anything to do for this bridge. */
export function needsDnsmasq(plan: BridgePlan): boolean {
  if (!plan.ipv4 && !plan.ipv6) return false;
  return plan.dnsMode !== 'none' || Boolean(plan.ipv4?.dhcp) || Boolean(plan.ipv6?.dhcp);
}

/** dnsmasq's config file for a bridge. */
export function dnsmasqConfig(plan: BridgePlan, files: { hosts: string; leases: string; pid: string; log: string }): string {
  const lines = [
    `# corral: DHCP and DNS of network ${plan.name}`,
    'strict-order', 'bind-interfaces', 'except-interface=lo', `interface=${plan.name}`,
    'no-ping', 'dhcp-rapid-commit', 'dhcp-no-override', 'dhcp-authoritative',
    'quiet-dhcp', 'quiet-dhcp6', 'quiet-ra',
    `dhcp-leasefile=${files.leases}`, `dhcp-hostsfile=${files.hosts}`,
    `pid-file=${files.pid}`, `log-facility=${files.log}`,
    // Stays root: the reservations it re-reads on SIGHUP live under the daemon's private data directory.
    'user=root',
  ];
  if (plan.ipv4) lines.push(`listen-address=${formatIp(4, plan.ipv4.cidr.address)}`);
  if (plan.ipv6) lines.push(`listen-address=${formatIp(6, plan.ipv6.cidr.address)}`);
  if (plan.ipv4?.dhcp) {
    for (const [from, to] of plan.ipv4.ranges) lines.push(`dhcp-range=${from},${to},${plan.ipv4.expiry}`);
    if (plan.ipv4.gateway) lines.push(`dhcp-option-force=3,${plan.ipv4.gateway}`);
    if (plan.mtu !== 1500) lines.push(`dhcp-option-force=26,${plan.mtu}`);
  }
  if (plan.ipv6?.dhcp) {
    lines.push('enable-ra', `dhcp-range=::,constructor:${plan.name},ra-stateless,ra-names,${plan.ipv6.expiry}`);
  }
  if (plan.dnsMode === 'none') {
    lines.push('port=0');
  } else {
    lines.push(`domain=${plan.domain}`, `local=/${plan.domain}/`, `interface-name=_gateway.${plan.domain},${plan.name}`);
    if (plan.dnsMode === 'managed') lines.push('dhcp-ignore-names');
    if (plan.search.length > 0) lines.push(`dhcp-option-force=option:domain-search,${plan.search.join(',')}`);
  }
  return `${lines.join('\n')}\n`;
}

/** Checks of one address against a subnet, as 400s naming the key. */
export function inSubnet(key: string, value: string, cidr: Cidr): void {
  const ip = parseIp(value);
  if (!ip || ip.family !== cidr.family || ip.value < networkOf(cidr) || ip.value > lastOf(cidr)) {
    throw badRequest(`The ${key} "${value}" is outside the network's subnet ${formatIp(cidr.family, networkOf(cidr))}/${cidr.prefix}`);
  }
}
