/**
 * Enforcement of ACLs on bridge networks with nftables, in a table of this plugin's own (`inet
 * corral_acl`, or `corral_acl_<hash>` for another data directory): the whole table is written in
 * one atomic batch on every change, so a failed write leaves the previous rules in place and no
 * rule is ever there twice. Like the bridge's own rules, ACLs see the bridge's routed traffic
 * (input, output, forward by the bridge's name); traffic between two ports of one bridge reaches
 * the forward hook when br_netfilter hands bridged frames to the IP hooks (bridge-nf-call-*).
 * Rules run drop first, then reject, then allow, then the network's default action.
 */
import { type HostTools } from '../../sdk/index.js';
import { dataDirTableName, NftTable } from '../../sdk/lib/network/index.js';
import type { AclRecord, AclRule, Direction } from './acl.js';
import { splitList, parseSubject } from './rules.js';

const TABLE_BASE = 'corral_acl';
export const aclTableName = (dataDir: string) => dataDirTableName(TABLE_BASE, dataDir);

/** A bridge with ACLs: its interface, the ACLs in `security.acls` order and the default actions. */
export interface BridgeAcls {
  bridge: string;
  acls: AclRecord[];
  defaults: Record<Direction, { action: string; logged: boolean }>;
}

const ORDER: Record<string, number> = { drop: 0, reject: 1, allow: 2 };
const VERDICT: Record<string, string> = { drop: 'drop', reject: 'reject', allow: 'accept' };
const q = (s: string) => JSON.stringify(s);
const prefix = (text: string) => `log prefix ${q(`${text.slice(0, 120)} `)} `;
const set = (items: string[]) => (items.length === 1 ? items[0]! : `{ ${items.join(', ')} }`);

/** The nft rules one ACL rule becomes (one per IP family it needs). */
export function ruleMatches(r: AclRule, dir: Direction, bridge: string): string[] {
  const side = dir === 'egress' ? `iifname ${q(bridge)}` : `oifname ${q(bridge)}`;
  const src = splitList(r.source).map((s) => parseSubject(s)!.address!);
  const dst = splitList(r.destination).map((s) => parseSubject(s)!.address!);
  let families: (4 | 6 | undefined)[] = [undefined];
  if (src.length || dst.length || r.protocol === 'icmp4' || r.protocol === 'icmp6') {
    families = ([4, 6] as const).filter((f) => (src.length === 0 || src.some((a) => a.family === f))
      && (dst.length === 0 || dst.some((a) => a.family === f))
      && !(r.protocol === 'icmp4' && f === 6) && !(r.protocol === 'icmp6' && f === 4));
  }
  return families.map((f) => {
    const parts = [side];
    const ipKw = f === 6 ? 'ip6' : 'ip';
    const s = src.filter((a) => a.family === f).map((a) => a.text);
    const d = dst.filter((a) => a.family === f).map((a) => a.text);
    if (s.length) parts.push(`${ipKw} saddr ${set(s)}`);
    if (d.length) parts.push(`${ipKw} daddr ${set(d)}`);
    if (r.protocol === 'tcp' || r.protocol === 'udp') {
      parts.push(`meta l4proto ${r.protocol}`);
      if (r.source_port) parts.push(`${r.protocol} sport ${set(splitList(r.source_port))}`);
      if (r.destination_port) parts.push(`${r.protocol} dport ${set(splitList(r.destination_port))}`);
    } else if (r.protocol === 'icmp4') {
      parts.push('meta l4proto icmp');
      if (r.icmp_type) parts.push(`icmp type ${r.icmp_type}`);
      if (r.icmp_code) parts.push(`icmp code ${r.icmp_code}`);
    } else if (r.protocol === 'icmp6') {
      parts.push('meta l4proto ipv6-icmp');
      if (r.icmp_type) parts.push(`icmpv6 type ${r.icmp_type}`);
      if (r.icmp_code) parts.push(`icmpv6 code ${r.icmp_code}`);
    }
    return parts.join(' ');
  });
}

const chainOf = (index: number, bridge: string) => `acl${index}_${bridge.replace(/[^A-Za-z0-9_]/g, '_')}`;

/** The whole table for these bridges. */
export function aclScript(table: string, bridges: BridgeAcls[]): string {
  const t = `inet ${table}`;
  const lines = [`add table ${t}`, `delete table ${t}`];
  if (bridges.length === 0) return `${lines.join('\n')}\n`;
  lines.push(`add table ${t}`);
  const input: string[] = [];
  const output: string[] = [];
  const forward: string[] = [];
  bridges.forEach((b, i) => {
    const chain = chainOf(i, b.bridge);
    const br = q(b.bridge);
    const body: string[] = ['ct state established,related accept'];
    const rules: { order: number; text: string }[] = [];
    for (const acl of b.acls) {
      for (const dir of ['ingress', 'egress'] as const) {
        acl[dir].forEach((r, n) => {
          if (r.state === 'disabled') return;
          const log = r.state === 'logged' ? prefix(`${acl.name}-${dir}-${n}`) : '';
          for (const m of ruleMatches(r, dir, b.bridge)) rules.push({ order: ORDER[r.action]!, text: `${m} ${log}${VERDICT[r.action]}` });
        });
      }
    }
    rules.sort((a, b2) => a.order - b2.order);
    body.push(...rules.map((r) => r.text));
    for (const dir of ['egress', 'ingress'] as const) {
      const d = b.defaults[dir];
      const side = dir === 'egress' ? `iifname ${br}` : `oifname ${br}`;
      body.push(`${side} ${d.logged ? prefix(`${b.bridge}-${dir}`) : ''}${VERDICT[d.action] ?? 'reject'}`);
    }
    lines.push(`add chain ${t} ${chain}`);
    for (const r of body) lines.push(`add rule ${t} ${chain} ${r}`);
    // The bridge's own services stay reachable: DNS, DHCP, and the ICMP that keeps IP working.
    input.push(`iifname ${br} tcp dport 53 accept`, `iifname ${br} udp dport 53 accept`, `iifname ${br} udp dport 67 accept`, `iifname ${br} udp dport 547 accept`,
      `iifname ${br} icmp type { destination-unreachable, time-exceeded, parameter-problem } accept`,
      `iifname ${br} icmpv6 type { destination-unreachable, packet-too-big, time-exceeded, parameter-problem, nd-router-solicit, nd-neighbor-solicit, nd-neighbor-advert, mld2-listener-report } accept`,
      `iifname ${br} jump ${chain}`);
    output.push(`oifname ${br} udp sport 67 accept`, `oifname ${br} udp sport 547 accept`,
      `oifname ${br} icmp type { destination-unreachable, time-exceeded, parameter-problem } accept`,
      `oifname ${br} icmpv6 type { destination-unreachable, packet-too-big, time-exceeded, parameter-problem, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert, mld2-listener-report } accept`,
      `oifname ${br} jump ${chain}`);
    forward.push(`iifname ${br} jump ${chain}`, `oifname ${br} jump ${chain}`);
  });
  for (const [name, hook, rules] of [['input', 'input', input], ['output', 'output', output], ['forward', 'forward', forward]] as const) {
    lines.push(`add chain ${t} ${name} { type filter hook ${hook} priority filter; policy accept; }`);
    for (const r of rules) lines.push(`add rule ${t} ${name} ${r}`);
  }
  return `${lines.join('\n')}\n`;
}

export class AclFirewall extends NftTable {
  constructor(tools: HostTools, dataDir: string) {
    super(tools, 'inet', TABLE_BASE, dataDir);
  }

  /** Write the table from what `state` answers when the write's turn comes (writes never interleave). */
  apply(state: () => Promise<BridgeAcls[]>): Promise<void> {
    return this.serial(async () => {
      const bridges = await state();
      const r = await this.replace(aclScript(this.name, bridges), bridges.length === 0);
      if (!r.ok) throw new Error(`nftables refused the ACL rules: ${r.stderr}`);
    });
  }
}
