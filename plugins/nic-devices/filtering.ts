/**
 * `security.mac_filtering`, `security.ipv4_filtering` and `security.ipv6_filtering` of bridged
 * NICs: nftables rules on the frames a bridge port receives from the instance. The network plugins
 * offer no firewall capability in the sdk yet, and layer-2 filtering needs the bridge family
 * anyway, so they live in a table of their own (`bridge corral-nic`, or `corral-nic_<hash>` for a
 * data directory other than the default, as the networks' tables): one chain per host-side
 * interface, reached through a verdict map keyed by interface name, so a NIC's rules are added
 * and removed in one atomic batch without touching the others'.
 */
import { type HostTools } from '../../sdk/index.js';
import { dataDirTableName, NftTable } from '../../sdk/lib/network/index.js';

/** The default data directory's table; any other data directory (tests, a second daemon) gets its own. */
export const nicTable = (dataDir: string) => dataDirTableName('corral-nic', dataDir);

export interface PortFilter {
  port: string;
  hwaddr: string;
  mac: boolean;
  /** undefined: no IPv4 filtering; [] filters every IPv4 source. */
  ipv4?: string[];
  ipv6?: string[];
}

const chain = (port: string) => `port_${port.replace(/[^A-Za-z0-9_]/g, '_')}`;

export function filterRules(T: string, f: PortFilter): string[] {
  const c = `${T} ${chain(f.port)}`;
  const rules: string[] = [];
  if (f.mac || f.ipv4 || f.ipv6) rules.push(`add rule ${c} ether saddr != ${f.hwaddr} drop`);
  if (f.ipv4) {
    const allowed = f.ipv4.length ? `{ ${f.ipv4.join(', ')} }` : '';
    // DHCP discovery comes from 0.0.0.0 before the instance has an address.
    rules.push(`add rule ${c} ether type ip ip saddr 0.0.0.0 udp dport 67 accept`);
    rules.push(allowed ? `add rule ${c} ether type ip ip saddr != ${allowed} drop` : `add rule ${c} ether type ip drop`);
    rules.push(allowed ? `add rule ${c} ether type arp arp saddr ip != ${allowed} drop` : `add rule ${c} ether type arp drop`);
  }
  if (f.ipv6) {
    // Unspecified (duplicate address detection) and link-local sources stay allowed.
    rules.push(`add rule ${c} ether type ip6 ip6 saddr != { ::, fe80::/10${f.ipv6.map((a) => `, ${a}`).join('')} } drop`);
  }
  return rules;
}

export class PortFilters extends NftTable {
  constructor(tools: HostTools, dataDir: string) {
    super(tools, 'bridge', 'corral-nic', dataDir);
  }

  private async ensureTable(): Promise<void> {
    if (await this.listJson('table', this.family, this.name)) return;
    const made = await this.batch([
      `add table ${this.ref}`,
      `add map ${this.ref} ports { type ifname : verdict; }`,
      `add chain ${this.ref} prerouting { type filter hook prerouting priority -200; policy accept; }`,
      `add rule ${this.ref} prerouting iifname vmap @ports`,
    ].join('\n'));
    if (!made.ok) throw new Error(`creating the nftables table ${this.name} failed: ${made.stderr}`);
  }

  apply(f: PortFilter): Promise<void> {
    return this.serial(async () => {
      await this.ensureTable();
      const name = chain(f.port);
      const script = [
        `add chain ${this.ref} ${name}`,
        `flush chain ${this.ref} ${name}`,
        ...filterRules(this.ref, f),
        `add element ${this.ref} ports { "${f.port}" : jump ${name} }`,
      ].join('\n');
      const r = await this.batch(script);
      if (!r.ok) throw new Error(`nftables refused the NIC filter: ${r.stderr}`);
    });
  }

  remove(port: string): Promise<void> {
    return this.serial(async () => {
      await this.dropPort(port);
      await this.dropTableIfUnused();
    });
  }

  private async dropPort(port: string): Promise<void> {
    await this.batch(`delete element ${this.ref} ports { "${port}" }`);
    await this.batch(`delete chain ${this.ref} ${chain(port)}`);
  }

  /** The verdict map's elements (`[port, verdict]`); undefined when there is no table. */
  private async portElements(): Promise<[unknown, unknown][] | undefined> {
    const items = await this.listJson<{ map?: { elem?: [unknown, unknown][] } }>('map', this.family, this.name, 'ports');
    return items?.flatMap((i) => i.map?.elem ?? []);
  }

  /** The table goes when no port is filtered any more (and comes back with the next filter). */
  private async dropTableIfUnused(): Promise<void> {
    const elements = await this.portElements();
    if (!elements || elements.length > 0) return;
    await this.batch(`delete table ${this.ref}`);
  }

  /** Chains whose interface is gone (a crash, an instance that stopped while no daemon ran). */
  leftovers(exists: (port: string) => boolean): Promise<void> {
    return this.serial(async () => {
      const elements = await this.portElements();
      // No table: nothing was left (the usual boot, which should not pay for a second look).
      if (!elements) return;
      const ports = elements.map((e) => e[0]).filter((p): p is string => typeof p === 'string');
      for (const port of ports) if (!exists(port)) await this.dropPort(port);
      await this.dropTableIfUnused();
    });
  }
}
