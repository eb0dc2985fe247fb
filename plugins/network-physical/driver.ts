/**
 * The `physical` network type: a host interface given a name (an OVN uplink on the reference;
 * here also what NICs with `network=` take into their instance). The network makes nothing but
 * the `<parent>.<vlan>` interface when `vlan` is set, and sets `mtu` on the interface. A parent
 * belongs to one physical network at most: two would hand the same interface out twice.
 */
import { createHash } from 'node:crypto';
import path from 'node:path';
import { badRequest, type HostTools, type NetworkDriver, type NetworkInfo, type NetworkNicSettings } from '../../sdk/index.js';
import { checkParent, hostInterfacePresent, NO_8021Q } from '../../sdk/lib/network/index.js';
import { PHYSICAL_KEYS } from './keys.js';

/** What the kernel gives a fresh interface; the reference puts it back when the network goes. */
const DEFAULT_MTU = '1500';

export class PhysicalDriver implements NetworkDriver {
  readonly type = 'physical';
  readonly configKeys = PHYSICAL_KEYS;
  readonly projects = false;
  /** Alias of the VLAN interfaces this daemon made, so `stop` removes only those. */
  private readonly marker: string;

  constructor(private readonly tools: HostTools, dataDir: string) {
    this.marker = `corral:${createHash('sha256').update(path.resolve(dataDir)).digest('hex').slice(0, 8)}`;
  }

  async validate(net: NetworkInfo, others: NetworkInfo[]): Promise<void> {
    const parent = checkParent(net);
    const sharing = others.find((o) => o.config.parent === parent);
    if (sharing) throw badRequest(`Parent interface "${parent}" is already used by network "${sharing.name}"`);
  }

  /** The network has no interface of its own (`state` answers 404, as the reference does). */
  interfaceName(net: NetworkInfo): string {
    return net.name;
  }

  /** The interface NICs take: the parent, or the VLAN interface on it. */
  private uplink(net: NetworkInfo): string {
    const { parent = '', vlan } = net.config;
    return vlan ? `${parent}.${vlan}` : parent;
  }

  nicSettings(net: NetworkInfo): NetworkNicSettings {
    return { parent: this.uplink(net), mtu: net.config.mtu ? Number(net.config.mtu) : undefined };
  }

  private async ip(args: string[]): Promise<{ ok: boolean; stderr: string }> {
    const r = await this.tools.run('ip', args, { allowFailure: true, timeoutMs: 10_000 });
    return { ok: r.exitCode === 0, stderr: r.stderr.trim() };
  }

  private async alias(iface: string): Promise<string> {
    const r = await this.tools.run('ip', ['-j', '-d', 'link', 'show', 'dev', iface], { allowFailure: true, timeoutMs: 10_000 });
    if (r.exitCode !== 0) return '';
    return ((JSON.parse(r.stdout) as { ifalias?: string }[])[0]?.ifalias) ?? '';
  }

  async start(net: NetworkInfo): Promise<void> {
    const { parent = '', vlan, gvrp, mtu } = net.config;
    const iface = this.uplink(net);
    let made = false;
    if (vlan && !hostInterfacePresent(iface) && hostInterfacePresent(parent)) {
      if (iface.length > 15) throw badRequest(`The VLAN interface name "${iface}" would be longer than 15 characters`);
      const r = await this.ip(['link', 'add', 'link', parent, 'name', iface, 'type', 'vlan', 'id', vlan, ...(gvrp === 'true' ? ['gvrp', 'on'] : [])]);
      if (!r.ok) {
        if (/Unknown device type|not supported/i.test(r.stderr)) throw badRequest(`"vlan" cannot be used: ${NO_8021Q}`);
        throw badRequest(`Failed to make the VLAN interface "${iface}": ${r.stderr}`);
      }
      made = true;
      await this.ip(['link', 'set', 'dev', iface, 'alias', this.marker]);
      await this.ip(['link', 'set', 'dev', iface, 'up']);
    }
    // Absent: a physical NIC has it inside an instance (it comes back with its settings at stop).
    if (mtu && hostInterfacePresent(iface)) {
      const r = await this.ip(['link', 'set', 'dev', iface, 'mtu', mtu]);
      if (!r.ok) {
        if (made) await this.ip(['link', 'del', 'dev', iface]);
        throw badRequest(`Failed to set MTU ${mtu} on "${iface}": ${r.stderr}`);
      }
    }
  }

  async stop(net: NetworkInfo): Promise<void> {
    const iface = this.uplink(net);
    if (!hostInterfacePresent(iface)) return;
    if (net.config.vlan && (await this.alias(iface)) === this.marker) {
      await this.ip(['link', 'del', 'dev', iface]);
      return;
    }
    if (net.config.mtu) await this.ip(['link', 'set', 'dev', iface, 'mtu', DEFAULT_MTU]);
  }

  async update(previous: NetworkInfo, next: NetworkInfo): Promise<void> {
    const moved = this.uplink(previous) !== this.uplink(next) || previous.config.gvrp !== next.config.gvrp;
    if (moved) await this.stop(previous);
    await this.start(next);
  }

  async delete(): Promise<void> {}
}
