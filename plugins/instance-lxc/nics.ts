/**
 * Network interfaces of containers. At start they are `lxc.net.N.*` entries of the generated
 * config (liblxc makes them before init runs); on a running container they are made on the host
 * and moved into its network namespace (`ip link set ... netns <init>`, renamed inside through
 * `nsenter`). What each container has is recorded next to its config, so that a later detach, a
 * stop or a restarted daemon knows the host-side names.
 */
import { badRequest, randomHex, type HostTools, type NicRunConfig } from '../../sdk/index.js';

export interface RecordedNic {
  device: string;
  nic: NicRunConfig;
  /** Added to a running container (liblxc does not know it). */
  hotplugged: boolean;
}

/** Nothing the config file could read as a line break or a second value may come from a value. */
function safe(what: string, value: string): string {
  if (!/^[A-Za-z0-9_.:@/+-]+$/.test(value)) throw badRequest(`Invalid ${what} "${value}"`);
  return value;
}

export function nicConfigLines(nics: NicRunConfig[]): string[] {
  // A network namespace of the container's own, its loopback up (`empty` with the up flag): `none`
  // would share the host's namespace, where a container's sysfs cannot be mounted.
  const lines: string[] = ['lxc.net.0.type = empty', 'lxc.net.0.flags = up'];
  nics.forEach((nic, n) => {
    const key = `lxc.net.${n + 1}`;
    lines.push(`${key}.type = ${nic.kind}`, `${key}.name = ${safe('interface name', nic.name)}`, `${key}.flags = up`);
    if (nic.kind === 'veth') {
      if (nic.hostName) lines.push(`${key}.veth.pair = ${safe('host interface name', nic.hostName)}`);
      if (nic.link) lines.push(`${key}.link = ${safe('bridge name', nic.link)}`);
    } else {
      lines.push(`${key}.link = ${safe('parent interface', nic.link ?? '')}`);
      if (nic.kind === 'macvlan') lines.push(`${key}.macvlan.mode = ${safe('macvlan mode', nic.macvlanMode ?? 'bridge')}`);
    }
    if (nic.hwaddr) lines.push(`${key}.hwaddr = ${safe('MAC address', nic.hwaddr)}`);
    if (nic.mtu) lines.push(`${key}.mtu = ${nic.mtu}`);
    for (const a of nic.ipv4 ?? []) lines.push(`${key}.ipv4.address = ${safe('IPv4 address', a)}`);
    if (nic.ipv4Gateway) lines.push(`${key}.ipv4.gateway = ${safe('IPv4 gateway', nic.ipv4Gateway)}`);
    for (const a of nic.ipv6 ?? []) lines.push(`${key}.ipv6.address = ${safe('IPv6 address', a)}`);
    if (nic.ipv6Gateway) lines.push(`${key}.ipv6.gateway = ${safe('IPv6 gateway', nic.ipv6Gateway)}`);
  });
  return lines;
}

/** Makes and removes interfaces of a running container with iproute2. */
export class NicPlumber {
  constructor(private readonly tools: HostTools) {}

  private async ip(args: string[], pid?: number): Promise<void> {
    const [cmd, full] = pid === undefined ? ['ip', args] : ['nsenter', ['-t', String(pid), '-n', 'ip', ...args]];
    const r = await this.tools.run(cmd, full, { allowFailure: true, timeoutMs: 10_000 });
    if (r.exitCode !== 0) throw badRequest(`Failed to set up the network interface (ip ${args.join(' ')}): ${r.stderr.trim()}`);
  }

  private async ipQuiet(args: string[], pid?: number): Promise<void> {
    await this.ip(args, pid).catch(() => undefined);
  }

  /** Existence of a host interface. */
  async exists(name: string): Promise<boolean> {
    const r = await this.tools.run('ip', ['link', 'show', 'dev', name], { allowFailure: true, timeoutMs: 10_000 });
    return r.exitCode === 0;
  }

  /** Make the interface, move it in, name it and configure it inside; on failure nothing is left. */
  async attach(pid: number, nic: NicRunConfig): Promise<void> {
    const temp = `cr${randomHex(5)}`;
    const inside = [...(nic.mtu ? ['mtu', String(nic.mtu)] : []), ...(nic.hwaddr ? ['address', nic.hwaddr] : [])];
    let hostSide: string | undefined;
    let moved = false;
    try {
      if (nic.kind === 'veth') {
        if (!nic.hostName) throw badRequest('A veth NIC needs a host-side name');
        await this.ip(['link', 'add', nic.hostName, ...(nic.mtu ? ['mtu', String(nic.mtu)] : []), 'type', 'veth', 'peer', 'name', temp, ...inside]);
        hostSide = nic.hostName;
        if (nic.link) await this.ip(['link', 'set', nic.hostName, 'master', nic.link]);
        await this.ip(['link', 'set', nic.hostName, 'up']);
        await this.ip(['link', 'set', temp, 'netns', String(pid)]);
      } else if (nic.kind === 'macvlan') {
        await this.ip(['link', 'add', temp, 'link', nic.link ?? '', ...inside, 'type', 'macvlan', 'mode', nic.macvlanMode ?? 'bridge']);
        hostSide = temp;
        await this.ip(['link', 'set', temp, 'netns', String(pid)]);
      } else {
        if (!nic.link) throw badRequest('A physical NIC needs its host interface');
        await this.ip(['link', 'set', nic.link, 'down']);
        await this.ip(['link', 'set', nic.link, 'name', temp]);
        await this.ip(['link', 'set', temp, 'netns', String(pid)]).catch(async (err) => {
          await this.ipQuiet(['link', 'set', temp, 'name', nic.link!]);
          throw err;
        });
        if (inside.length) await this.ip(['link', 'set', temp, ...inside], pid);
      }
      moved = true;
      hostSide = undefined;
      await this.ip(['link', 'set', temp, 'name', nic.name], pid);
      await this.ip(['link', 'set', nic.name, 'up'], pid);
      await this.addressesInside(pid, nic);
    } catch (err) {
      if (hostSide) await this.ipQuiet(['link', 'del', hostSide]);
      if (moved) await this.remove(pid, nic, temp).catch(() => undefined);
      throw err;
    }
  }

  private async addressesInside(pid: number, nic: NicRunConfig): Promise<void> {
    for (const a of nic.ipv4 ?? []) await this.ip(['-4', 'addr', 'add', a, 'dev', nic.name], pid);
    for (const a of nic.ipv6 ?? []) await this.ip(['-6', 'addr', 'add', a, 'dev', nic.name, 'nodad'], pid);
    if (nic.ipv4Gateway) {
      await this.ip(['-4', 'route', 'replace', `${nic.ipv4Gateway}/32`, 'dev', nic.name, 'scope', 'link'], pid);
      await this.ip(['-4', 'route', 'replace', 'default', 'via', nic.ipv4Gateway, 'dev', nic.name], pid);
    }
    if (nic.ipv6Gateway) await this.ip(['-6', 'route', 'replace', 'default', 'via', nic.ipv6Gateway, 'dev', nic.name], pid);
  }

  /** Take the interface out: veth and macvlan ends are deleted, a physical one goes back under its name. */
  async remove(pid: number, nic: NicRunConfig, current = nic.name): Promise<void> {
    if (nic.kind !== 'phys') {
      await this.ip(['link', 'del', current], pid);
      return;
    }
    const temp = `cr${randomHex(5)}`;
    await this.ipQuiet(['link', 'set', current, 'down'], pid);
    await this.ip(['link', 'set', current, 'name', temp], pid);
    // Pid 1 of the host: nsenter entered only the network namespace.
    await this.ip(['link', 'set', temp, 'netns', '1'], pid);
    await this.ip(['link', 'set', temp, 'name', nic.link!]);
  }
}
