/**
 * The `bridge` network type: a Linux bridge (iproute2), dnsmasq for DHCP and DNS, nftables for
 * NAT and firewall. `start` reconciles: it creates what is missing and corrects what differs, so
 * boot adopts a bridge and dnsmasq a previous daemon left running instead of duplicating them.
 * Bridges carry an alias naming this daemon's data directory; that is how leftovers of deleted
 * networks are told apart from other daemons' bridges after a crash.
 */
import { createHash, randomInt } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  badRequest, KeyedLock, type HostTools, type NetworkCleanup, type NetworkDriver, type NetworkInfo,
  type NetworkLease, type NetworkLeases, type NetworkLifetime, type NetworkNicHooks, type NicAttachment,
  type WarningsService,
} from '../../sdk/index.js';
import { dataDirTableName } from '../../sdk/lib/network/index.js';
import type Logger from 'bunyan';
import { contains, formatIp, networkOf, overlaps, parseCidr, parseIp, subnetText, type Cidr } from './cidr.js';
import { Dnsmasq, dnsmasqFiles, dnsmasqPid, type DnsmasqFiles } from './dnsmasq.js';
import { Firewall, type FirewallPlan } from './firewall.js';
import { hostRoutes, type HostRoute } from './host-routes.js';
import { BRIDGE_KEYS } from './keys.js';
import { bridgePlan, dnsmasqConfig, inSubnet, needsDnsmasq, type BridgePlan, type TunnelPlan } from './plan.js';
import { readReservations, reservationKey, writeReservations } from './reservations.js';

export interface BridgeDriverDeps {
  tools: HostTools;
  dataDir: string;
  warnings: WarningsService;
  log: Logger;
}

interface IpLinkDetail {
  ifname: string;
  ifalias?: string;
  address?: string;
  mtu: number;
  master?: string;
  flags: string[];
  linkinfo?: { info_kind?: string; info_data?: Record<string, unknown> };
  addr_info?: { family: string; local: string; prefixlen: number; scope: string }[];
}

const DNSMASQ_WARNING = 'Network DHCP/DNS server restarted';
const WATCH_MS = 2000;

export class BridgeDriver implements NetworkDriver {
  readonly type = 'bridge';
  readonly configKeys = BRIDGE_KEYS;
  readonly projects = false;
  private readonly root: string;
  private readonly marker: string;
  private readonly firewall: Firewall;
  private readonly dnsmasq: Dnsmasq;
  private readonly lock = new KeyedLock();
  /** Networks this daemon keeps up, for the dnsmasq watch. */
  private readonly active = new Map<string, NetworkInfo>();
  private watchTimer: NodeJS.Timeout | undefined;

  constructor(private readonly deps: BridgeDriverDeps) {
    this.root = path.join(deps.dataDir, 'networks');
    const id = createHash('sha256').update(path.resolve(deps.dataDir)).digest('hex').slice(0, 8);
    this.marker = `corral:${id}`;
    // The default data directory gets the plain table name; test daemons get their own tables.
    this.firewall = new Firewall(deps.tools, dataDirTableName('corral', deps.dataDir));
    this.dnsmasq = new Dnsmasq(deps.tools);
  }

  get table(): string {
    return this.firewall.table;
  }

  interfaceName(net: NetworkInfo): string {
    return net.name;
  }

  private dir(name: string): string {
    return path.join(this.root, name);
  }

  private files(name: string): DnsmasqFiles {
    return dnsmasqFiles(this.dir(name));
  }

  /** A stable locally-administered-looking MAC in the range the reference uses, derived from the name. */
  private defaultHwaddr(name: string): string {
    const h = createHash('sha256').update(`${this.marker}/${name}`).digest();
    return `00:16:3e:${[h[0], h[1], h[2]].map((b) => b!.toString(16).padStart(2, '0')).join(':')}`;
  }

  private plan(net: NetworkInfo): BridgePlan {
    return bridgePlan(net, this.defaultHwaddr(net.name));
  }

  // ---- creation-time values and checks -------------------------------------------------------

  /** The host's routes; read once for the fillDefaults + validate pair of one change (`last` ends the pair). */
  private routesMemo: { name: string; at: number; routes: Promise<HostRoute[]> } | undefined;
  private async routes(name: string, last = false): Promise<HostRoute[]> {
    const memo = this.routesMemo;
    const fresh = memo && memo.name === name && Date.now() - memo.at < 2000 ? memo.routes : hostRoutes(this.deps.tools);
    this.routesMemo = last ? undefined : { name, at: Date.now(), routes: fresh };
    return fresh;
  }

  async fillDefaults(net: NetworkInfo, others: NetworkInfo[], change: 'create' | 'update'): Promise<void> {
    if (change === 'create') {
      net.config['ipv4.address'] ??= 'auto';
      net.config['ipv6.address'] ??= 'auto';
    }
    const wants4 = net.config['ipv4.address'] === 'auto';
    const wants6 = net.config['ipv6.address'] === 'auto';
    if (!wants4 && !wants6) return;
    const taken = [...(await this.routes(net.name)).map((r) => r.subnet), ...others.flatMap((o) => subnetsOf(o))];
    if (wants4) {
      net.config['ipv4.address'] = pickSubnet(taken, () => `10.${randomInt(256)}.${randomInt(256)}.1/24`, 4);
      if (net.config['ipv4.nat'] === undefined) net.config['ipv4.nat'] = 'true';
    }
    if (wants6) {
      const group = () => randomInt(0x10000).toString(16);
      net.config['ipv6.address'] = pickSubnet(taken, () => `fd42:${group()}:${group()}:${group()}::1/64`, 6);
      if (net.config['ipv6.nat'] === undefined) net.config['ipv6.nat'] = 'true';
    }
  }

  async validate(net: NetworkInfo, others: NetworkInfo[]): Promise<void> {
    const plan = this.plan(net);
    for (const fam of [plan.ipv4, plan.ipv6]) {
      if (!fam) continue;
      const key = `ipv${fam.family}.address`;
      const c = fam.cidr;
      const hostBits = fam.family === 4 ? 32 : 128;
      if (c.prefix >= hostBits - (fam.family === 4 ? 1 : 0)) throw badRequest(`The ${key} "${net.config[key]}" leaves no room for other hosts on the network`);
      if (fam.family === 4 && (c.address === networkOf(c) || c.address === (networkOf(c) | ((1n << BigInt(32 - c.prefix)) - 1n)))) {
        throw badRequest(`The ${key} "${net.config[key]}" is the subnet's network or broadcast address, not a usable host address`);
      }
      if (fam.family === 6 && c.address === networkOf(c)) throw badRequest(`The ${key} "${net.config[key]}" is the subnet's own address, not a usable host address`);
      for (const other of others) {
        for (const s of subnetsOf(other)) {
          if (overlaps(s, c)) throw badRequest(`The ${key} subnet ${subnetText(c)} overlaps with network "${other.name}" (${subnetText(s)})`);
        }
      }
      for (const route of fam.routes) {
        for (const other of others) {
          for (const s of subnetsOf(other)) {
            if (overlaps(s, route)) throw badRequest(`The ipv${fam.family}.routes entry ${subnetText(route)} overlaps with network "${other.name}" (${subnetText(s)})`);
          }
        }
      }
    }
    if (plan.ipv4 || plan.ipv6) {
      for (const route of await this.routes(net.name, true)) {
        if (route.dev === net.name) continue;
        for (const fam of [plan.ipv4, plan.ipv6]) {
          if (fam && overlaps(route.subnet, fam.cidr)) {
            throw badRequest(`The ipv${fam.family}.address subnet ${subnetText(fam.cidr)} overlaps with ${subnetText(route.subnet)} already in use on this host (${route.dev || 'a route'})`);
          }
        }
      }
    }
    const v4 = plan.ipv4;
    for (const key of ['ipv4.dhcp.ranges', 'ipv4.dhcp.gateway']) {
      if (!v4 && net.config[key]) throw badRequest(`"${key}" needs an IPv4 address on the network (ipv4.address)`);
    }
    for (const ifname of plan.externalInterfaces) {
      if (!existsSync(`/sys/class/net/${ifname}`)) throw badRequest(`The bridge.external_interfaces entry "${ifname}" does not exist on this host`);
      if (ifname === net.name) throw badRequest('A bridge cannot be its own external interface');
    }
    if (v4) {
      if (net.config['ipv4.dhcp.ranges']) {
        for (const [from, to] of v4.ranges) {
          inSubnet('ipv4.dhcp.ranges start', from, v4.cidr);
          inSubnet('ipv4.dhcp.ranges end', to, v4.cidr);
        }
      }
      if (v4.gateway) inSubnet('ipv4.dhcp.gateway', v4.gateway, v4.cidr);
    }
    for (const t of plan.tunnels) {
      if (t.ifname.length > 15) throw badRequest(`The tunnel interface name "${t.ifname}" is longer than 15 characters: use a shorter network or tunnel name`);
      if (!net.config[`tunnel.${t.name}.protocol`]) throw badRequest(`Tunnel "${t.name}" needs tunnel.${t.name}.protocol`);
      if (t.dev && !existsSync(`/sys/class/net/${t.dev}`)) throw badRequest(`The tunnel.${t.name}.interface "${t.dev}" does not exist on this host`);
      if (!t.remote && !t.dev && t.group) throw badRequest(`A multicast tunnel needs tunnel.${t.name}.interface (or set tunnel.${t.name}.remote)`);
    }
  }

  // ---- host state -----------------------------------------------------------------------------

  private async linkDetail(name: string): Promise<IpLinkDetail | undefined> {
    if (!existsSync(`/sys/class/net/${name}`)) return undefined;
    const res = await this.deps.tools.run('ip', ['-j', '-d', 'addr', 'show', 'dev', name], { allowFailure: true, timeoutMs: 10000 });
    if (res.exitCode !== 0) return undefined;
    return (JSON.parse(res.stdout) as IpLinkDetail[])[0];
  }

  private async ipBatch(commands: string[]): Promise<void> {
    if (commands.length === 0) return;
    const res = await this.deps.tools.run('ip', ['-batch', '-'], { input: `${commands.join('\n')}\n`, allowFailure: true, timeoutMs: 15000 });
    if (res.exitCode !== 0) throw badRequest(`Setting up the bridge failed: ${(res.stderr || res.stdout).trim().split('\n').slice(-2).join(' ')}`);
  }

  private firewallPlan(plan: BridgePlan, dns: boolean): FirewallPlan {
    const fam = (p: BridgePlan['ipv4'] | BridgePlan['ipv6']) => p && {
      subnet: p.cidr, nat: p.nat, natAddress: p.natAddress, natOrder: p.natOrder, firewall: p.firewall, dhcp: p.dhcp,
    };
    return { bridge: plan.name, ipv4: fam(plan.ipv4), ipv6: fam(plan.ipv6), dns };
  }

  async start(net: NetworkInfo): Promise<void> {
    await this.lock.run(net.name, () => this.startLocked(net));
  }

  private async startLocked(net: NetworkInfo, previous?: NetworkInfo): Promise<void> {
    const plan = this.plan(net);
    const before = await this.linkDetail(plan.name);
    if (before && before.linkinfo?.info_kind !== 'bridge') throw badRequest(`The host interface "${plan.name}" exists and is not a bridge`);
    const files = this.files(plan.name);
    let startedDnsmasq = false;
    const hadDir = existsSync(files.dir);
    try {
      mkdirSync(files.dir, { recursive: true, mode: 0o755 });
      const cmds: string[] = [];
      if (!before) cmds.push(`link add name ${plan.name} type bridge`);
      if (before?.ifalias !== this.marker) cmds.push(`link set dev ${plan.name} alias ${this.marker}`);
      if (before?.address !== plan.hwaddr) cmds.push(`link set dev ${plan.name} address ${plan.hwaddr}`);
      if (before?.mtu !== plan.mtu) cmds.push(`link set dev ${plan.name} mtu ${plan.mtu}`);
      const wanted = [plan.ipv4, plan.ipv6].filter((f) => f !== undefined).map((f) => `${formatIp(f.family, f.cidr.address)}/${f.cidr.prefix}`);
      const present = (before?.addr_info ?? []).filter((a) => a.scope === 'global').map((a) => `${a.local}/${a.prefixlen}`);
      for (const a of present) if (!wanted.includes(a)) cmds.push(`addr del ${a} dev ${plan.name}`);
      for (const a of wanted) if (!present.includes(a)) cmds.push(`addr add ${a} dev ${plan.name}${a.includes(':') ? ' nodad' : ''}`);
      if (!before?.flags.includes('UP')) cmds.push(`link set dev ${plan.name} up`);
      const routes = [...(plan.ipv4?.routes ?? []), ...(plan.ipv6?.routes ?? [])];
      for (const r of routes) cmds.push(`route replace ${subnetText(r)} dev ${plan.name} proto static`);
      if (previous) {
        const old = this.plan(previous);
        const keep = new Set(routes.map(subnetText));
        for (const r of [...(old.ipv4?.routes ?? []), ...(old.ipv6?.routes ?? [])]) {
          if (!keep.has(subnetText(r))) cmds.push(`route del ${subnetText(r)} dev ${plan.name}`);
        }
      }
      await this.ipBatch(cmds);
      await this.tunnels(plan, previous && this.plan(previous));
      await this.externalInterfaces(plan, previous && this.plan(previous));
      if (plan.ipv4 && (plan.ipv4.nat || plan.ipv4.routes.length > 0)) writeSysctl('/proc/sys/net/ipv4/ip_forward', '1');
      if (plan.ipv6) writeSysctl('/proc/sys/net/ipv6/conf/all/forwarding', '1');
      const dns = needsDnsmasq(plan);
      // dnsmasq and the rules do not depend on each other: set them up side by side.
      const server = dns
        ? this.dnsmasq.ensure(files, dnsmasqConfig(plan, files)).then((started) => { startedDnsmasq = started; })
        : this.dnsmasq.stop(files);
      const rules = this.firewall.apply(this.firewallPlan(plan, dns && plan.dnsMode !== 'none'));
      const [a, b] = await Promise.allSettled([server, rules]);
      if (a.status === 'rejected') throw a.reason;
      if (b.status === 'rejected') throw b.reason;
      this.active.set(plan.name, net);
    } catch (err) {
      // Only a bridge this call created is taken down whole; an existing one is the caller's to restore.
      if (!before) {
        await this.teardown(plan.name).catch(() => undefined);
        if (!hadDir) rmSync(files.dir, { recursive: true, force: true });
      } else if (startedDnsmasq) await this.dnsmasq.stop(files).catch(() => undefined);
      throw err;
    }
  }

  /** vxlan tunnels: created when missing, re-created when their settings changed, removed when gone. */
  private async tunnels(plan: BridgePlan, old?: BridgePlan): Promise<void> {
    const cmds: string[] = [];
    const same = (a: TunnelPlan, b: TunnelPlan) => JSON.stringify(a) === JSON.stringify(b);
    for (const t of old?.tunnels ?? []) {
      const next = plan.tunnels.find((n) => n.name === t.name);
      if ((!next || !same(next, t)) && existsSync(`/sys/class/net/${t.ifname}`)) cmds.push(`link del ${t.ifname}`);
    }
    for (const t of plan.tunnels) {
      const prev = old?.tunnels.find((o) => o.name === t.name);
      if (existsSync(`/sys/class/net/${t.ifname}`) && (!prev || same(prev, t))) continue;
      const args = [`link add ${t.ifname} type vxlan id ${t.id}`];
      if (t.local) args.push(`local ${t.local}`);
      if (t.remote) args.push(`remote ${t.remote}`);
      else if (t.group) args.push(`group ${t.group}`);
      if (t.dev) args.push(`dev ${t.dev}`);
      args.push(`dstport ${t.port}`, `ttl ${t.ttl}`);
      cmds.push(args.join(' '), `link set dev ${t.ifname} master ${plan.name} up`);
    }
    await this.ipBatch(cmds);
  }

  /** Host interfaces plugged into the bridge as ports (`bridge.external_interfaces`); dropped ones let go. */
  private async externalInterfaces(plan: BridgePlan, old?: BridgePlan): Promise<void> {
    const cmds: string[] = [];
    for (const ifname of old?.externalInterfaces ?? []) {
      if (!plan.externalInterfaces.includes(ifname) && existsSync(`/sys/class/net/${plan.name}/brif/${ifname}`)) cmds.push(`link set dev ${ifname} nomaster`);
    }
    for (const ifname of plan.externalInterfaces) {
      if (!existsSync(`/sys/class/net/${plan.name}/brif/${ifname}`)) cmds.push(`link set dev ${ifname} master ${plan.name} up`);
    }
    await this.ipBatch(cmds);
  }

  /**
   * dnsmasq, the chains, the tunnels and the bridge, whatever of them exists, taken down side by
   * side (deleting a bridge alone costs the kernel tens of milliseconds). The last network of this
   * daemon takes the nftables table along.
   */
  private async teardown(name: string): Promise<void> {
    this.active.delete(name);
    const removeLink = async () => {
      if (!existsSync(`/sys/class/net/${name}/bridge`)) return;
      const tunnels = listDir(`/sys/class/net/${name}/brif`).filter((port) => port.startsWith(`${name}-`));
      await this.ipBatch([...tunnels.map((port) => `link del ${port}`), `link del ${name}`]).catch(() => undefined);
    };
    await Promise.all([this.dnsmasq.stop(this.files(name)), this.firewall.remove(name, this.active.size === 0), removeLink()]);
  }

  async stop(net: NetworkInfo): Promise<void> {
    await this.lock.run(net.name, () => this.teardown(net.name));
  }

  async update(previous: NetworkInfo, next: NetworkInfo): Promise<void> {
    await this.lock.run(next.name, () => this.startLocked(next, previous));
  }

  async delete(net: NetworkInfo): Promise<void> {
    rmSync(this.dir(net.name), { recursive: true, force: true });
  }

  async rename(net: NetworkInfo, newName: string): Promise<void> {
    if (existsSync(this.dir(net.name))) {
      rmSync(this.dir(newName), { recursive: true, force: true });
      renameSync(this.dir(net.name), this.dir(newName));
    }
    // dnsmasq's config names its files; the next start writes it anew.
    rmSync(path.join(this.dir(newName), 'dnsmasq.conf'), { force: true });
  }

  // ---- capabilities ---------------------------------------------------------------------------

  readonly leases: NetworkLeases = {
    list: async (net) => {
      const plan = this.plan(net);
      const files = this.files(net.name);
      const reservations = readReservations(files.dir);
      const staticMacs = new Map(Object.values(reservations).map((r) => [r.hwaddr.toLowerCase(), r]));
      const out: NetworkLease[] = [];
      for (const fam of [plan.ipv4, plan.ipv6]) {
        if (fam) out.push({ hostname: `${net.name}.gw`, hwaddr: '', address: formatIp(fam.family, fam.cidr.address), type: 'gateway', location: '' });
      }
      const seen = new Set<string>();
      let text = '';
      try {
        text = readFileSync(files.leases, 'utf8');
      } catch { /* no lease yet */ }
      for (const line of text.split('\n')) {
        const f = line.trim().split(/\s+/);
        if (f.length < 4 || f[0] === 'duid') continue;
        const isV4 = /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/i.test(f[1]!);
        const hwaddr = isV4 ? f[1]!.toLowerCase() : '';
        const reserved = hwaddr ? staticMacs.get(hwaddr) : undefined;
        out.push({
          hostname: reserved?.hostname ?? (f[3] === '*' ? '' : f[3]!),
          hwaddr,
          address: f[2]!,
          // Every plugged NIC has a reservation (for its DNS name); only one naming this address makes it static.
          type: reserved && (reserved.ipv4 === f[2] || reserved.ipv6 === f[2]) ? 'static' : 'dynamic',
          location: '',
        });
        seen.add(`${hwaddr}/${f[2]}`);
      }
      for (const r of Object.values(reservations)) {
        for (const address of [r.ipv4, r.ipv6]) {
          if (address && !seen.has(`${r.hwaddr.toLowerCase()}/${address}`)) out.push({ hostname: r.hostname, hwaddr: r.hwaddr.toLowerCase(), address, type: 'static', location: '' });
        }
      }
      return out;
    },
  };

  readonly nics: NetworkNicHooks = {
    plugged: async (net, nic) => {
      await this.lock.run(net.name, async () => {
        const plan = this.plan(net);
        const files = this.files(net.name);
        const all = readReservations(files.dir);
        const key = reservationKey(nic.project, nic.instance, nic.device);
        checkNicAddress(plan, nic, 4);
        checkNicAddress(plan, nic, 6);
        for (const [k, r] of Object.entries(all)) {
          if (k === key) continue;
          if (nic.ipv4 && r.ipv4 === nic.ipv4) throw badRequest(`The address ${nic.ipv4} is already reserved on network "${net.name}"`);
          if (nic.ipv6 && r.ipv6 === nic.ipv6) throw badRequest(`The address ${nic.ipv6} is already reserved on network "${net.name}"`);
        }
        mkdirSync(files.dir, { recursive: true });
        all[key] = { hwaddr: nic.hwaddr.toLowerCase(), hostname: nic.instance, ipv4: nic.ipv4, ipv6: nic.ipv6 };
        writeReservations(files.dir, files.hosts, all);
        this.dnsmasq.reload(files);
      });
    },
    unplugged: async (net, nic) => {
      await this.lock.run(net.name, async () => {
        const files = this.files(net.name);
        const all = readReservations(files.dir);
        const key = reservationKey(nic.project, nic.instance, nic.device);
        if (!(key in all)) return;
        delete all[key];
        writeReservations(files.dir, files.hosts, all);
        this.dnsmasq.reload(files);
      });
    },
  };

  readonly cleanup: NetworkCleanup = {
    leftovers: async (known) => {
      const names = new Set(known.map((n) => n.name));
      // Both looks at once: this is on every boot's way to a serving socket.
      const [res, table] = await Promise.all([
        this.deps.tools.run('ip', ['-j', '-d', 'link', 'show', 'type', 'bridge'], { timeoutMs: 10000 }),
        this.firewall.tableState(),
      ]);
      for (const link of JSON.parse(res.stdout || '[]') as IpLinkDetail[]) {
        if (link.ifalias === this.marker && !names.has(link.ifname)) {
          this.deps.log.info({ bridge: link.ifname }, 'removing the bridge of a network that no longer exists');
          await this.teardown(link.ifname);
        }
      }
      for (const dir of listDir(this.root)) {
        if (names.has(dir)) continue;
        await this.dnsmasq.stop(this.files(dir));
        rmSync(this.dir(dir), { recursive: true, force: true });
      }
      // A bridge torn down above had its chains dropped with it; remove() finds nothing to do for those.
      for (const bridge of table.bridges) {
        if (!names.has(bridge)) await this.firewall.remove(bridge);
      }
      // With no network known, no chain is left in the table now: it goes, if it was there.
      if (known.length === 0 && table.exists) await this.firewall.dropTable();
    },
  };

  readonly lifetime: NetworkLifetime = {
    watch: () => {
      this.watchTimer ??= setInterval(() => void this.checkDnsmasq(), WATCH_MS);
      this.watchTimer.unref();
    },
    shutdown: async (nets, hostShutdown) => {
      if (this.watchTimer) clearInterval(this.watchTimer);
      this.watchTimer = undefined;
      if (!hostShutdown) return;
      for (const net of nets) await this.stop(net).catch((err) => this.deps.log.error({ err, network: net.name }, 'taking a network down failed'));
      await this.firewall.dropTableIfEmpty();
    },
  };

  /** Restart the dnsmasq of any active network whose process is gone, with a warning. */
  async checkDnsmasq(): Promise<void> {
    for (const net of [...this.active.values()]) {
      await this.lock.run(net.name, async () => {
        if (this.active.get(net.name) !== net) return;
        const plan = this.plan(net);
        const files = this.files(net.name);
        if (!needsDnsmasq(plan) || dnsmasqPid(files) !== undefined) return;
        this.deps.log.warn({ network: net.name }, 'dnsmasq is gone; restarting it');
        try {
          await this.dnsmasq.ensure(files, dnsmasqConfig(plan, files));
          await this.deps.warnings.raise({
            type: DNSMASQ_WARNING,
            message: `The DHCP/DNS server (dnsmasq) of network "${net.name}" had stopped and was restarted`,
            severity: 'moderate',
            project: net.project,
            entityUrl: `/1.0/networks/${encodeURIComponent(net.name)}`,
          });
        } catch (err) {
          this.deps.log.error({ err, network: net.name }, 'restarting dnsmasq failed');
        }
      }).catch(() => undefined);
    }
  }
}

function subnetsOf(net: NetworkInfo): Cidr[] {
  const out: Cidr[] = [];
  for (const key of ['ipv4.address', 'ipv6.address']) {
    const c = parseCidr(net.config[key] ?? '');
    if (c) out.push(c);
  }
  for (const key of ['ipv4.routes', 'ipv6.routes']) {
    for (const part of (net.config[key] ?? '').split(',').map((s) => s.trim()).filter(Boolean)) {
      const c = parseCidr(part);
      if (c) out.push(c);
    }
  }
  return out;
}

function pickSubnet(taken: Cidr[], candidate: () => string, family: 4 | 6): string {
  for (let i = 0; i < 200; i++) {
    const text = candidate();
    const c = parseCidr(text)!;
    if (!taken.some((t) => overlaps(t, c))) return text;
  }
  throw badRequest(`No unused IPv${family} subnet could be found on this host: set ipv${family}.address yourself`);
}

function checkNicAddress(plan: BridgePlan, nic: NicAttachment, family: 4 | 6): void {
  const value = family === 4 ? nic.ipv4 : nic.ipv6;
  if (!value) return;
  const fam = family === 4 ? plan.ipv4 : plan.ipv6;
  if (!fam) throw badRequest(`The NIC asks for IPv${family} address ${value} but network "${plan.name}" has no IPv${family} subnet`);
  inSubnet(`ipv${family}.address`, value, fam.cidr);
  const ip = parseIp(value)!;
  if (ip.value === fam.cidr.address) throw badRequest(`The address ${value} is the network's own address`);
  if (!contains(fam.cidr, ip.family, ip.value)) throw badRequest(`The address ${value} is outside the network's subnet`);
}

function listDir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function writeSysctl(file: string, value: string): void {
  try {
    if (readFileSync(file, 'utf8').trim() !== value) writeFileSync(file, value);
  } catch { /* not writable here: NAT then needs the host's own setting */ }
}
