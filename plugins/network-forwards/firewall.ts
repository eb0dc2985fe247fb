/**
 * Forwards as nftables DNAT rules, in a table of this plugin's own (`inet corral_fwd`, or
 * `corral_fwd_<hash>` for another data directory), written whole in one atomic batch on every
 * change: prerouting for traffic arriving at the listen address, output for connections made on
 * this host, and a masquerade for a target reaching its own forward (hairpin).
 */
import { type HostTools } from '../../sdk/index.js';
import { dataDirTableName, NftTable } from '../../sdk/lib/network/index.js';
import { expandPorts, parseIp } from './checks.js';
import type { ForwardRecord } from './forward.js';

const TABLE_BASE = 'corral_fwd';
export const forwardTableName = (dataDir: string) => dataDirTableName(TABLE_BASE, dataDir);

/** DNAT rules (without hook) and hairpin masquerades for some forwards. */
export function forwardRules(forwards: ForwardRecord[]): { dnat: string[]; hairpin: string[] } {
  const dnat: string[] = [];
  const targets = new Set<string>();
  for (const f of forwards) {
    const fam = parseIp(f.listen_address)!.family === 4 ? 'ip' : 'ip6';
    const to = (address: string, port?: number) => (port === undefined ? address : fam === 'ip6' ? `[${address}]:${port}` : `${address}:${port}`);
    for (const p of f.ports) {
      targets.add(p.target_address);
      const listen = expandPorts(p.listen_port, 'listen port');
      const target = p.target_port ? expandPorts(p.target_port, 'target port') : [];
      const match = `${fam} daddr ${f.listen_address} ${p.protocol} dport`;
      if (target.length <= 1) {
        // Every listen port to one target port (or to the same port): one rule with the whole list.
        dnat.push(`${match} { ${p.listen_port} } dnat ${fam} to ${to(p.target_address, target[0])}`);
      } else {
        // Paired ranges: one rule looking each port up in a map to its address and port. A rule per port took
        // nft 8.8 s to load for 65,535 pairs (a map: 0.9 s), and the table is loaded whole at every change.
        const pairs = listen.map((lp, i) => `${lp} : ${p.target_address} . ${target[i]}`).join(', ');
        dnat.push(`${match} { ${p.listen_port} } dnat ${fam} to ${p.protocol} dport map { ${pairs} }`);
      }
    }
    const dflt = f.config.target_address;
    if (dflt) {
      targets.add(dflt);
      dnat.push(`${fam} daddr ${f.listen_address} dnat ${fam} to ${dflt}`);
    }
  }
  const hairpin = [...targets].sort().map((t) => {
    const fam = parseIp(t)!.family === 4 ? 'ip' : 'ip6';
    return `${fam} saddr ${t} ${fam} daddr ${t} masquerade`;
  });
  return { dnat, hairpin };
}

export function forwardScript(table: string, forwards: ForwardRecord[]): string {
  const t = `inet ${table}`;
  const lines = [`add table ${t}`, `delete table ${t}`];
  if (forwards.length > 0) {
    const { dnat, hairpin } = forwardRules(forwards);
    lines.push(`add table ${t}`,
      `add chain ${t} prerouting { type nat hook prerouting priority dstnat; policy accept; }`,
      `add chain ${t} output { type nat hook output priority -100; policy accept; }`,
      `add chain ${t} postrouting { type nat hook postrouting priority srcnat; policy accept; }`);
    for (const r of dnat) lines.push(`add rule ${t} prerouting ${r}`, `add rule ${t} output ${r}`);
    for (const r of hairpin) lines.push(`add rule ${t} postrouting ${r}`);
  }
  return `${lines.join('\n')}\n`;
}

export class ForwardFirewall extends NftTable {
  constructor(tools: HostTools, dataDir: string) {
    super(tools, 'inet', TABLE_BASE, dataDir);
  }

  /** Write the table for these forwards; writes never interleave. */
  apply(forwards: () => Promise<ForwardRecord[]>): Promise<void> {
    return this.serial(async () => {
      const records = await forwards();
      const r = await this.replace(forwardScript(this.name, records), records.length === 0);
      if (!r.ok) throw new Error(`nftables refused the forward rules: ${r.stderr}`);
    });
  }
}
