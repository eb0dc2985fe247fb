/**
 * Host-side work for NICs once their interfaces exist: bridge VLANs and port isolation, traffic
 * limits (tc), host routes and addresses, proxy neighbour entries, VLAN parents. Everything here
 * goes away with the host-side interface, except proxy neighbour entries and VLAN parents, which
 * `undo*` remove.
 */
import { badRequest, type HostTools } from '../../sdk/index.js';
import { bitsPerSecond } from './addresses.js';
import { hasVlanFiltering, VLAN_FILTERING_MISSING } from './options.js';

export class HostSide {
  constructor(private readonly tools: HostTools) {}

  async run(cmd: string, args: string[], quiet = false): Promise<void> {
    const r = await this.tools.run(cmd, args, { allowFailure: true, timeoutMs: 10_000 });
    if (r.exitCode !== 0 && !quiet) throw badRequest(`Failed to set up the NIC (${cmd} ${args.join(' ')}): ${r.stderr.trim()}`);
  }

  /**
   * `vlan` (untagged, the port's PVID) and `vlan.tagged` on a bridge port. VLAN filtering is
   * turned on for the bridge, as the reference does; the port leaves the default VLAN 1 unless
   * it is asked for.
   */
  async bridgeVlans(bridge: string, port: string, untagged: string | undefined, tagged: string[]): Promise<void> {
    if (untagged === undefined && !tagged.length) return;
    if (!hasVlanFiltering(bridge)) throw badRequest(VLAN_FILTERING_MISSING);
    await this.run('ip', ['link', 'set', 'dev', bridge, 'type', 'bridge', 'vlan_filtering', '1']);
    if (untagged !== undefined && untagged !== '1') await this.run('bridge', ['vlan', 'del', 'dev', port, 'vid', '1']);
    if (untagged !== undefined) await this.run('bridge', ['vlan', 'add', 'dev', port, 'vid', untagged, 'pvid', 'untagged']);
    for (const vid of tagged) await this.run('bridge', ['vlan', 'add', 'dev', port, 'vid', vid]);
  }

  async portIsolation(port: string): Promise<void> {
    await this.run('bridge', ['link', 'set', 'dev', port, 'isolated', 'on']);
  }

  /**
   * `limits.ingress` (into the instance: the host end's egress, shaped with htb) and
   * `limits.egress` (out of the instance: the host end's ingress, policed).
   */
  async limits(port: string, ingress: string | undefined, egress: string | undefined): Promise<void> {
    if (ingress) {
      const rate = String(bitsPerSecond(ingress));
      await this.run('tc', ['qdisc', 'replace', 'dev', port, 'root', 'handle', '1:', 'htb', 'default', '10']);
      await this.run('tc', ['class', 'replace', 'dev', port, 'parent', '1:', 'classid', '1:10', 'htb', 'rate', `${rate}bit`, 'burst', '1024k']);
    }
    if (egress) {
      const rate = String(bitsPerSecond(egress));
      await this.run('tc', ['qdisc', 'replace', 'dev', port, 'handle', 'ffff:', 'ingress']);
      const r = await this.tools.run('tc', ['filter', 'replace', 'dev', port, 'parent', 'ffff:', 'protocol', 'all', 'u32', 'match', 'u32', '0', '0',
        'police', 'rate', `${rate}bit`, 'burst', '1024k', 'mtu', '64kb', 'drop', 'flowid', ':1'], { allowFailure: true, timeoutMs: 10_000 });
      if (r.exitCode !== 0) {
        if (/TC action module/.test(r.stderr)) throw badRequest('"limits.egress" (and the egress part of "limits.max") is not supported here: this kernel has no tc police action');
        throw badRequest(`Failed to limit the NIC's egress: ${r.stderr.trim()}`);
      }
    }
  }

  /** Routes on the host towards the instance through its host-side interface. */
  async routes(port: string, v4: string[], v6: string[], table4?: string, table6?: string): Promise<void> {
    for (const r of v4) await this.run('ip', ['-4', 'route', 'replace', r, 'dev', port, ...(table4 ? ['table', table4] : [])]);
    for (const r of v6) await this.run('ip', ['-6', 'route', 'replace', r, 'dev', port, ...(table6 ? ['table', table6] : [])]);
  }

  async addresses(port: string, v4?: string, v6?: string): Promise<void> {
    if (v4) await this.run('ip', ['-4', 'addr', 'replace', `${v4}/32`, 'dev', port]);
    if (v6) await this.run('ip', ['-6', 'addr', 'replace', `${v6}/128`, 'dev', port, 'nodad']);
  }

  async proxyNeighbours(parent: string, v4: string[], v6: string[], remove = false): Promise<void> {
    for (const a of v4) await this.run('ip', ['-4', 'neigh', remove ? 'del' : 'replace', 'proxy', a, 'dev', parent], remove);
    for (const a of v6) await this.run('ip', ['-6', 'neigh', remove ? 'del' : 'replace', 'proxy', a, 'dev', parent], remove);
  }

  /** Routes left in a host table by a routed NIC (those in `main` go with the interface). */
  async removeRoutes(v4: string[], v6: string[], table4?: string, table6?: string): Promise<void> {
    if (table4) for (const r of v4) await this.run('ip', ['-4', 'route', 'del', r, 'table', table4], true);
    if (table6) for (const r of v6) await this.run('ip', ['-6', 'route', 'del', r, 'table', table6], true);
  }

  /** `<parent>.<vlan>`, made when missing; resolves with whether this call made it. */
  async vlanParent(parent: string, vlan: string, gvrp = false): Promise<{ name: string; created: boolean }> {
    const name = `${parent}.${vlan}`;
    if (name.length > 15) throw badRequest(`The VLAN interface name "${name}" would be longer than 15 characters`);
    const r = await this.tools.run('ip', ['link', 'show', 'dev', name], { allowFailure: true, timeoutMs: 10_000 });
    if (r.exitCode === 0) return { name, created: false };
    const made = await this.tools.run('ip', ['link', 'add', 'link', parent, 'name', name, 'type', 'vlan', 'id', vlan, ...(gvrp ? ['gvrp', 'on'] : [])], { allowFailure: true, timeoutMs: 10_000 });
    if (made.exitCode !== 0) {
      if (/Unknown device type/.test(made.stderr)) throw badRequest('"vlan" is not supported here: VLAN interfaces need the 8021q kernel module, which this host does not have');
      throw badRequest(`Failed to make the VLAN interface "${name}": ${made.stderr.trim()}`);
    }
    await this.run('ip', ['link', 'set', name, 'up']);
    return { name, created: true };
  }

  async deleteLink(name: string): Promise<void> {
    await this.run('ip', ['link', 'del', name], true);
  }
}
