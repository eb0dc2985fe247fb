/**
 * Host interfaces as the API shows them: the unmanaged entries of /1.0/networks (typed from sysfs,
 * no process per interface) and the `/state` of any interface (one `ip -j` call plus sysfs reads).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { notFound, type HostTools } from '../../sdk/index.js';

const SYS = '/sys/class/net';

export function hostInterfaceNames(): string[] {
  try {
    return readdirSync(SYS).sort();
  } catch {
    return [];
  }
}

export const hostInterfaceExists = (name: string): boolean => name !== '' && !name.includes('/') && existsSync(`${SYS}/${name}`);

/** The `type` the reference gives an unmanaged interface. */
export function hostInterfaceType(name: string): string {
  const dir = `${SYS}/${name}`;
  if (name === 'lo' || readSys(`${dir}/type`) === '772') return 'loopback';
  if (existsSync(`${dir}/bridge`)) return 'bridge';
  if (existsSync(`${dir}/bonding`)) return 'bond';
  if (existsSync(`/proc/net/vlan/${name}`)) return 'vlan';
  if (existsSync(`${dir}/device`)) return 'physical';
  return 'unknown';
}

function readSys(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
}

const sysInt = (file: string): number => Number.parseInt(readSys(file) ?? '0', 10) || 0;

interface IpAddrInfo {
  family: string;
  local: string;
  prefixlen: number;
  scope: string;
}

interface IpLink {
  ifname: string;
  flags: string[];
  mtu: number;
  address?: string;
  link?: string;
  addr_info?: IpAddrInfo[];
  stats64?: { rx: Record<string, number>; tx: Record<string, number> };
  linkinfo?: { info_kind?: string; info_data?: Record<string, unknown> };
}

export interface NetworkStateView {
  addresses: { family: string; address: string; netmask: string; scope: string }[];
  counters: Record<string, number>;
  hwaddr: string;
  mtu: number;
  state: string;
  type: string;
  bond: Record<string, unknown> | null;
  bridge: Record<string, unknown> | null;
  vlan: Record<string, unknown> | null;
  ovn: null;
}

/** Live state of a host interface; 404 when it does not exist. */
export async function interfaceState(tools: HostTools, name: string): Promise<NetworkStateView> {
  if (!hostInterfaceExists(name)) throw notFound(`Network interface "${name}" not found`);
  const res = await tools.run('ip', ['-j', '-s', '-d', 'addr', 'show', 'dev', name], { allowFailure: true, timeoutMs: 10000 });
  if (res.exitCode !== 0) throw notFound(`Network interface "${name}" not found`);
  const link = (JSON.parse(res.stdout) as IpLink[])[0];
  if (!link) throw notFound(`Network interface "${name}" not found`);
  const rx = link.stats64?.rx ?? {};
  const tx = link.stats64?.tx ?? {};
  const flags = new Set(link.flags);
  return {
    addresses: (link.addr_info ?? []).map((a) => ({ family: a.family, address: a.local, netmask: String(a.prefixlen), scope: a.scope })),
    counters: {
      bytes_received: rx.bytes ?? 0,
      bytes_sent: tx.bytes ?? 0,
      packets_received: rx.packets ?? 0,
      packets_sent: tx.packets ?? 0,
      errors_received: rx.errors ?? 0,
      errors_sent: tx.errors ?? 0,
      packets_dropped_outbound: tx.dropped ?? 0,
      packets_dropped_inbound: rx.dropped ?? 0,
    },
    hwaddr: link.address ?? '',
    mtu: link.mtu,
    state: flags.has('UP') ? 'up' : 'down',
    type: flags.has('LOOPBACK') ? 'loopback' : flags.has('POINTOPOINT') ? 'point-to-point' : 'broadcast',
    bond: bondSection(name),
    bridge: bridgeSection(name),
    vlan: vlanSection(link),
    ovn: null,
  };
}

function bridgeSection(name: string): Record<string, unknown> | null {
  const dir = `${SYS}/${name}/bridge`;
  if (!existsSync(dir)) return null;
  let ports: string[] = [];
  try {
    ports = readdirSync(`${SYS}/${name}/brif`).sort();
  } catch { /* no ports */ }
  const filtering = sysInt(`${dir}/vlan_filtering`) === 1;
  return {
    id: readSys(`${dir}/bridge_id`) ?? '',
    stp: sysInt(`${dir}/stp_state`) !== 0,
    forward_delay: sysInt(`${dir}/forward_delay`),
    vlan_default: filtering ? sysInt(`${dir}/default_pvid`) : 0,
    vlan_filtering: filtering,
    upper_devices: ports,
  };
}

function bondSection(name: string): Record<string, unknown> | null {
  const dir = `${SYS}/${name}/bonding`;
  if (!existsSync(dir)) return null;
  const first = (file: string) => (readSys(file) ?? '').split(/\s+/)[0] ?? '';
  return {
    mode: first(`${dir}/mode`),
    transmit_policy: first(`${dir}/xmit_hash_policy`),
    up_delay: sysInt(`${dir}/updelay`),
    down_delay: sysInt(`${dir}/downdelay`),
    mii_frequency: sysInt(`${dir}/miimon`),
    mii_state: readSys(`${dir}/mii_status`) ?? '',
    lower_devices: (readSys(`${dir}/slaves`) ?? '').split(/\s+/).filter(Boolean).sort(),
  };
}

function vlanSection(link: IpLink): Record<string, unknown> | null {
  if (link.linkinfo?.info_kind !== 'vlan') return null;
  return { lower_device: link.link ?? '', vid: Number(link.linkinfo.info_data?.id ?? 0) };
}
