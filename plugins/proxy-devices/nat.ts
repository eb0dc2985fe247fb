/**
 * Proxy devices in NAT mode (`nat=true`): no forwarder, but DNAT rules that send the listen
 * address and ports to the instance's static address on a bridged NIC, so the server sees the
 * real client address. The rules live in the daemon's own `inet corral-proxy` table (another
 * data directory's daemon has `corral-proxy_<hash>`), each device
 * in base chains of its own (prerouting for other hosts, output for this host, postrouting for the
 * instance reaching itself through the listen address): a device's rules come and go in one
 * atomic batch without touching the others'.
 */
import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import { badRequest, type DeviceConfig, type HostTools } from '../../sdk/index.js';
import { dataDirTableName, NftTable } from '../../sdk/lib/network/index.js';
import { connectPort, type ProxyAddress } from './address.js';

/** The default data directory's table; any other data directory (tests, a second daemon) gets its own. */
export const natTable = (dataDir: string) => dataDirTableName('corral-proxy', dataDir);

const isWildcard = (host: string) => host === '0.0.0.0' || host === '::';
const isLoopback = (host: string) => host.startsWith('127.') || host === '::1';

/** Checks of the device's own options (the static address is checked at start). */
export function checkNatOptions(config: DeviceConfig, listen: ProxyAddress, connect: ProxyAddress): void {
  if ((config.bind ?? 'host') !== 'host') throw new Error('"nat" mode works for bind=host only');
  if (listen.protocol === 'unix' || connect.protocol === 'unix' || listen.protocol !== connect.protocol) {
    throw new Error(`"nat" mode forwards tcp to tcp or udp to udp only, not ${listen.protocol} to ${connect.protocol}`);
  }
  if (isIP(listen.host) !== isIP(connect.host)) throw new Error('"nat" mode needs listen and connect addresses of the same IP family');
  if (isLoopback(listen.host)) throw new Error('"nat" mode cannot listen on a loopback address: use a host address');
}

/** The instance's static addresses on bridged NICs (or NICs on a managed network). */
export function staticAddresses(devices: Record<string, DeviceConfig>): string[] {
  return Object.values(devices)
    .filter((d) => d.type === 'nic' && (d.nictype === 'bridged' || (!d.nictype && d.network)))
    .flatMap((d) => [d['ipv4.address'], d['ipv6.address']])
    .filter((a): a is string => Boolean(a));
}

/** The address DNAT sends to: the connect address, which must be one of the static addresses (a wildcard picks the one of its family). */
export function natTarget(connect: ProxyAddress, devices: Record<string, DeviceConfig>): string {
  const statics = staticAddresses(devices);
  const family = isIP(connect.host);
  if (isWildcard(connect.host)) {
    const found = statics.find((a) => isIP(a) === family);
    if (!found) throw badRequest(`"nat" mode needs a bridged NIC with a static IPv${family} address ("ipv${family}.address") on the instance`);
    return found;
  }
  if (!statics.includes(connect.host)) throw badRequest(`"nat" mode connects to a static address of the instance's bridged NICs; ${connect.host} is not one`);
  return connect.host;
}

export class NatRules extends NftTable {
  constructor(tools: HostTools, dataDir: string) {
    super(tools, 'inet', 'corral-proxy', dataDir);
  }

  static chainBase(key: string): string {
    return `d${createHash('sha1').update(key).digest('hex').slice(0, 12)}`;
  }

  /** Rules for one device: listen port i to connect port i (or the single connect port). */
  apply(key: string, listen: ProxyAddress, connect: ProxyAddress, target: string): Promise<void> {
    return this.serial(async () => {
      const base = NatRules.chainBase(key);
      const v6 = isIP(target) === 6;
      const fam = v6 ? 'ip6' : 'ip';
      const proto = listen.protocol;
      const to = (port: number) => (v6 ? `[${target}]:${port}` : `${target}:${port}`);
      const match = isWildcard(listen.host) ? `meta nfproto ${v6 ? 'ipv6' : 'ipv4'} fib daddr type local` : `${fam} daddr ${listen.host}`;
      const lines = [
        `add table ${this.ref}`,
        ...this.dropLines(base),
        `add chain ${this.ref} ${base}_pre { type nat hook prerouting priority dstnat; policy accept; }`,
        `add chain ${this.ref} ${base}_out { type nat hook output priority -100; policy accept; }`,
        `add chain ${this.ref} ${base}_post { type nat hook postrouting priority srcnat; policy accept; }`,
      ];
      listen.ports.forEach((lp, i) => {
        const cp = connectPort(connect, i);
        lines.push(`add rule ${this.ref} ${base}_pre ${match} ${proto} dport ${lp} dnat ${fam} to ${to(cp)}`);
        lines.push(`add rule ${this.ref} ${base}_out ${match} ${proto} dport ${lp} dnat ${fam} to ${to(cp)}`);
        // The instance reaching its own service through the listen address: answers must come back through the host.
        lines.push(`add rule ${this.ref} ${base}_post ${fam} saddr ${target} ${fam} daddr ${target} ${proto} dport ${cp} masquerade`);
      });
      const r = await this.batch(`${lines.join('\n')}\n`);
      if (!r.ok) throw badRequest(`nftables refused the proxy NAT rules: ${r.stderr}`);
    });
  }

  private dropLines(base: string): string[] {
    // `add` first makes the flush and delete safe when a chain is absent.
    return ['pre', 'out', 'post'].flatMap((c) => [`add chain ${this.ref} ${base}_${c}`, `flush chain ${this.ref} ${base}_${c}`, `delete chain ${this.ref} ${base}_${c}`]);
  }

  remove(key: string): Promise<void> {
    return this.serial(async () => {
      await this.batch(`add table ${this.ref}\n${this.dropLines(NatRules.chainBase(key)).join('\n')}\n`);
      // The table goes with its last device (and comes back with the next one).
      const items = await this.listJson<{ chain?: unknown }>('table', this.family, this.name);
      if (items && !items.some((i) => i.chain)) await this.batch(`delete table ${this.ref}\n`);
    });
  }
}
