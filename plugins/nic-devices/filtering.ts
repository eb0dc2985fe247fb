/**
 * `security.mac_filtering`, `security.ipv4_filtering` and `security.ipv6_filtering` of bridged
 * NICs: nftables rules on the frames a bridge port receives from the instance. The network plugins
 * offer no firewall capability in the sdk yet, and layer-2 filtering needs the bridge family
 * anyway, so they live in a table of their own (`bridge corral-nic`, or `corral-nic_<hash>` for a
 * data directory other than the default, as the networks' tables): one chain per host-side
 * interface, reached through a verdict map keyed by interface name, so a NIC's rules are added
 * and removed in one atomic batch without touching the others'.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { HostTools } from '../../sdk/index.js';

/** The default data directory's table; any other data directory (tests, a second daemon) gets its own. */
export function nicTable(dataDir: string): string {
  const resolved = path.resolve(dataDir);
  return resolved === '/var/lib/corral' ? 'corral-nic' : `corral-nic_${createHash('sha256').update(resolved).digest('hex').slice(0, 8)}`;
}
/** npm puts node_modules/.bin first on PATH, where a JavaScript tool is also called `nft`. */
const NFT = existsSync('/usr/sbin/nft') ? '/usr/sbin/nft' : 'nft';

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

export class PortFilters {
  private queue: Promise<unknown> = Promise.resolve();

  private readonly table: string;
  private readonly T: string;

  constructor(private readonly tools: HostTools, dataDir: string) {
    this.table = nicTable(dataDir);
    this.T = `bridge ${this.table}`;
  }

  /** One batch at a time: the table's creation must not race. */
  private serial<R>(fn: () => Promise<R>): Promise<R> {
    const next = this.queue.then(fn, fn);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async nft(script: string): Promise<{ ok: boolean; stderr: string }> {
    const r = await this.tools.run(NFT, ['-f', '-'], { input: script, allowFailure: true, timeoutMs: 15_000 });
    return { ok: r.exitCode === 0, stderr: r.stderr.trim() };
  }

  private async ensureTable(): Promise<void> {
    const r = await this.tools.run(NFT, ['list', 'table', 'bridge', this.table], { allowFailure: true, timeoutMs: 15_000 });
    if (r.exitCode === 0) return;
    const made = await this.nft([
      `add table ${this.T}`,
      `add map ${this.T} ports { type ifname : verdict; }`,
      `add chain ${this.T} prerouting { type filter hook prerouting priority -200; policy accept; }`,
      `add rule ${this.T} prerouting iifname vmap @ports`,
    ].join('\n'));
    if (!made.ok) throw new Error(`creating the nftables table ${this.table} failed: ${made.stderr}`);
  }

  apply(f: PortFilter): Promise<void> {
    return this.serial(async () => {
      await this.ensureTable();
      const name = chain(f.port);
      const script = [
        `add chain ${this.T} ${name}`,
        `flush chain ${this.T} ${name}`,
        ...filterRules(this.T, f),
        `add element ${this.T} ports { "${f.port}" : jump ${name} }`,
      ].join('\n');
      const r = await this.nft(script);
      if (!r.ok) throw new Error(`nftables refused the NIC filter: ${r.stderr}`);
    });
  }

  remove(port: string): Promise<void> {
    return this.serial(async () => {
      const name = chain(port);
      await this.nft(`delete element ${this.T} ports { "${port}" }`);
      await this.nft(`delete chain ${this.T} ${name}`);
      await this.dropTableIfUnused();
    });
  }

  /** The table goes when no port is filtered any more (and comes back with the next filter). */
  private async dropTableIfUnused(): Promise<void> {
    const r = await this.tools.run(NFT, ['-j', 'list', 'map', 'bridge', this.table, 'ports'], { allowFailure: true, timeoutMs: 15_000 });
    if (r.exitCode !== 0) return;
    const items = (JSON.parse(r.stdout) as { nftables: { map?: { elem?: unknown[] } }[] }).nftables;
    if (items.some((i) => (i.map?.elem ?? []).length > 0)) return;
    await this.nft(`delete table ${this.T}`);
  }

  /** Chains whose interface is gone (a crash, an instance that stopped while no daemon ran). */
  leftovers(exists: (port: string) => boolean): Promise<void> {
    return this.serial(async () => {
      const r = await this.tools.run(NFT, ['-j', 'list', 'map', 'bridge', this.table, 'ports'], { allowFailure: true, timeoutMs: 15_000 });
      if (r.exitCode !== 0) return;
      const items = (JSON.parse(r.stdout) as { nftables: { map?: { elem?: [string, unknown][] } }[] }).nftables;
      const ports = items.flatMap((i) => i.map?.elem ?? []).map((e) => e[0]).filter((p) => typeof p === 'string');
      for (const port of ports) {
        if (exists(port)) continue;
        await this.nft(`delete element ${this.T} ports { "${port}" }`);
        await this.nft(`delete chain ${this.T} ${chain(port)}`);
      }
      await this.dropTableIfUnused();
    });
  }
}
