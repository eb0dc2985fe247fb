/**
 * nftables rules of bridge networks, in the daemon's own `inet` table: per network, base chains
 * for input/output (DHCP and DNS to the bridge), forward (the bridge's traffic) and postrouting
 * (NAT). Every change rewrites a network's chains in one atomic `nft -f` batch that first
 * creates, empties and drops each chain, so running it twice never duplicates a rule.
 */
import { type HostTools } from '../../sdk/index.js';
import { NFT_PATH as NFT } from '../../sdk/lib/network/index.js';
import { subnetText, type Cidr } from './cidr.js';

export interface FirewallPlan {
  bridge: string;
  ipv4?: { subnet: Cidr; nat: boolean; natAddress?: string; natOrder: string; firewall: boolean; dhcp: boolean };
  ipv6?: { subnet: Cidr; nat: boolean; natAddress?: string; natOrder: string; firewall: boolean; dhcp: boolean };
  /** Whether the bridge's DNS server runs. */
  dns: boolean;
}

export const CHAIN_KINDS = ['in', 'out', 'fwd', 'pstrt'] as const;
const chainName = (kind: string, bridge: string) => `${kind}.${bridge}`;

export class Firewall {
  constructor(private readonly tools: HostTools, readonly table: string) {}

  private dropChains(bridge: string): string[] {
    return CHAIN_KINDS.flatMap((kind) => {
      const c = `inet ${this.table} ${chainName(kind, bridge)}`;
      return [`add chain ${c}`, `flush chain ${c}`, `delete chain ${c}`];
    });
  }

  /** The batch putting a network's rules in place. */
  script(plan: FirewallPlan): string {
    const br = JSON.stringify(plan.bridge);
    const t = `inet ${this.table}`;
    const lines = [`add table ${t}`, ...this.dropChains(plan.bridge)];
    const input: string[] = [];
    const output: string[] = [];
    const forward: string[] = [];
    const nat: { rule: string; order: string }[] = [];
    if (plan.dns) {
      input.push(`iifname ${br} tcp dport 53 accept`, `iifname ${br} udp dport 53 accept`);
      output.push(`oifname ${br} tcp sport 53 accept`, `oifname ${br} udp sport 53 accept`);
    }
    for (const [fam, cfg] of [['ip', plan.ipv4], ['ip6', plan.ipv6]] as const) {
      if (!cfg) continue;
      const icmp = fam === 'ip' ? 'icmp type { destination-unreachable, time-exceeded, parameter-problem }' : 'icmpv6 type { destination-unreachable, packet-too-big, time-exceeded, parameter-problem, nd-router-solicit, nd-neighbor-solicit, nd-neighbor-advert, mld2-listener-report }';
      input.push(`iifname ${br} ${icmp} accept`);
      output.push(`oifname ${br} ${icmp} accept`);
      if (cfg.dhcp) {
        input.push(fam === 'ip' ? `iifname ${br} udp dport 67 accept` : `iifname ${br} udp dport 547 accept`);
        output.push(fam === 'ip' ? `oifname ${br} udp sport 67 accept` : `oifname ${br} udp sport 547 accept`);
      }
      if (cfg.firewall) {
        forward.push(`meta nfproto ${fam === 'ip' ? 'ipv4' : 'ipv6'} oifname ${br} accept`, `meta nfproto ${fam === 'ip' ? 'ipv4' : 'ipv6'} iifname ${br} accept`);
      }
      if (cfg.nat) {
        const net = subnetText(cfg.subnet);
        const action = cfg.natAddress ? `snat ${fam} to ${cfg.natAddress}` : 'masquerade';
        nat.push({ rule: `${fam} saddr ${net} ${fam} daddr != ${net} ${action}`, order: cfg.natOrder });
      }
    }
    const chain = (kind: string, hook: string, rules: string[], type = 'filter', priority = 'filter') => {
      if (rules.length === 0) return;
      const c = `${t} ${chainName(kind, plan.bridge)}`;
      lines.push(`add chain ${c} { type ${type} hook ${hook} priority ${priority}; policy accept; }`);
      for (const r of rules) lines.push(`add rule ${c} ${r}`);
    };
    chain('in', 'input', input);
    chain('out', 'output', output);
    chain('fwd', 'forward', forward);
    // One postrouting chain; `after` runs behind the host's own source NAT, `before` ahead of it.
    const late = nat.some((n) => n.order === 'after');
    chain('pstrt', 'postrouting', nat.map((n) => n.rule), 'nat', late ? 'srcnat + 1' : 'srcnat - 1');
    return `${lines.join('\n')}\n`;
  }

  async apply(plan: FirewallPlan): Promise<void> {
    await this.tools.run(NFT, ['-f', '-'], { input: this.script(plan), timeoutMs: 15000 });
  }

  /** Drop a network's chains (nothing to do when the table or chains are gone already), and with `dropTable` the table. */
  async remove(bridge: string, dropTable = false): Promise<void> {
    const lines = [`add table inet ${this.table}`, ...this.dropChains(bridge), ...(dropTable ? [`delete table inet ${this.table}`] : [])];
    await this.tools.run(NFT, ['-f', '-'], { input: `${lines.join('\n')}\n`, timeoutMs: 15000 });
  }

  /** Whether the table is there, and the bridges that have chains in it. */
  async tableState(): Promise<{ exists: boolean; bridges: string[] }> {
    const res = await this.tools.run(NFT, ['-j', 'list', 'table', 'inet', this.table], { allowFailure: true, timeoutMs: 15000 });
    if (res.exitCode !== 0) return { exists: false, bridges: [] };
    const items = (JSON.parse(res.stdout) as { nftables: Record<string, { name?: string }>[] }).nftables;
    const names = new Set<string>();
    for (const item of items) {
      const chain = item.chain?.name;
      const dot = chain?.indexOf('.') ?? -1;
      if (chain && dot > 0 && (CHAIN_KINDS as readonly string[]).includes(chain.slice(0, dot))) names.add(chain.slice(dot + 1));
    }
    return { exists: true, bridges: [...names].sort() };
  }

  /** Drop the table when no network has rules left. */
  async dropTableIfEmpty(): Promise<void> {
    const table = await this.tableState();
    if (table.exists && table.bridges.length === 0) await this.dropTable();
  }

  /** Drop the table (nothing to do when it is gone already). */
  async dropTable(): Promise<void> {
    await this.tools.run(NFT, ['delete', 'table', 'inet', this.table], { allowFailure: true, timeoutMs: 15000 });
  }
}
