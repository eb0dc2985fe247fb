/**
 * Host-side helpers of the network tests: names unique to a run, network namespaces joined to a
 * bridge by a veth pair, and a look at what a bridge network left on the host. All test traffic
 * stays inside these namespaces and the bridges the tests create.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** The system's nft: node_modules/.bin (on PATH under npm) holds an unrelated one. */
export const NFT = '/usr/sbin/nft';

/** `crt` + 6 random hex digits + an optional suffix: short enough for an interface name. */
export const uniqueName = (suffix = ''): string => `crt${randomBytes(3).toString('hex')}${suffix}`;

export function sh(cmd: string, args: string[], input?: string): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(cmd, args, { input, encoding: 'utf8', timeout: 30000 });
  return { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
}

export const linkExists = (name: string): boolean => existsSync(`/sys/class/net/${name}`);

/**
 * Host links that hang off `parent` (macvlan, vlan) or whose veth peer sits in the same namespace
 * as `peerOf`'s: counting these, not every host link, keeps a check blind to other test files
 * that make and remove interfaces at the same time.
 */
export function linksRelatedTo(opts: { parent?: string; peerOf?: string }): string[] {
  const links = JSON.parse(execFileSync('ip', ['-j', 'link', 'show'], { encoding: 'utf8' })) as any[];
  const netnsid = opts.peerOf === undefined ? undefined : links.find((l) => l.ifname === opts.peerOf)?.link_netnsid;
  return links
    .filter((l) => (opts.parent !== undefined && l.link === opts.parent)
      || (netnsid !== undefined && l.link_netnsid === netnsid))
    .map((l) => l.ifname as string);
}

/** Pids of the dnsmasq processes serving a network's directory. */
export function dnsmasqPids(netDir: string): number[] {
  const conf = `--conf-file=${path.join(netDir, 'dnsmasq.conf')}`;
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (cmdline.includes(conf)) pids.push(Number(entry));
    } catch { /* gone */ }
  }
  return pids;
}

/** The rules of the nft table (all chains), one string per rule, as `chain: rule`. */
export function nftRules(table: string): string[] {
  const r = sh(NFT, ['-j', 'list', 'table', 'inet', table]);
  if (r.status !== 0) return [];
  const items = JSON.parse(r.stdout).nftables as any[];
  return items.filter((i) => i.rule).map((i) => `${i.rule.chain}: ${JSON.stringify(i.rule.expr)}`);
}

export function nftChains(table: string): any[] {
  const r = sh(NFT, ['-j', 'list', 'table', 'inet', table]);
  if (r.status !== 0) return [];
  return (JSON.parse(r.stdout).nftables as any[]).filter((i) => i.chain).map((i) => i.chain);
}

export interface Namespace {
  name: string;
  /** Host end of the veth pair (a port of the bridge). */
  hostEnd: string;
  /** The namespace end's MAC. */
  mac: string;
  exec(cmd: string[]): { status: number | null; stdout: string; stderr: string };
  /** Ask for a lease with busybox udhcpc; answers the environment its script saw. */
  dhcp(): Record<string, string>;
  remove(): void;
}

/** A network namespace with a veth pair whose host end is a port of `bridge`. */
export function joinBridge(bridge: string, mac?: string): Namespace {
  const name = uniqueName('n');
  const hostEnd = uniqueName('h');
  const inner = uniqueName('i');
  const must = (args: string[]) => {
    const r = sh('ip', args);
    if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr}`);
  };
  must(['netns', 'add', name]);
  must(['link', 'add', hostEnd, 'type', 'veth', 'peer', 'name', inner]);
  if (mac) must(['link', 'set', 'dev', inner, 'address', mac]);
  must(['link', 'set', inner, 'netns', name]);
  must(['link', 'set', hostEnd, 'master', bridge, 'up']);
  must(['-n', name, 'link', 'set', 'lo', 'up']);
  must(['-n', name, 'link', 'set', inner, 'name', 'eth0']);
  must(['-n', name, 'link', 'set', 'eth0', 'up']);
  const link = JSON.parse(sh('ip', ['-n', name, '-j', 'link', 'show', 'eth0']).stdout)[0];
  const scratch = mkdtempSync(path.join(tmpdir(), 'corral-udhcpc-'));
  const script = path.join(scratch, 'script.sh');
  const envFile = path.join(scratch, 'env');
  // udhcpc calls the script with the lease in its environment: keep it and configure the address.
  writeFileSync(script, `#!/bin/busybox sh\nif [ "$1" = bound ] || [ "$1" = renew ]; then\n  env > ${envFile}\n  /bin/busybox ip addr add "$ip/$mask" dev "$interface"\nfi\nexit 0\n`);
  chmodSync(script, 0o755);
  return {
    name,
    hostEnd,
    mac: link.address,
    exec: (cmd) => sh('ip', ['netns', 'exec', name, ...cmd]),
    dhcp() {
      const r = sh('ip', ['netns', 'exec', name, 'busybox', 'udhcpc', '-i', 'eth0', '-n', '-q', '-t', '5', '-T', '1', '-f', '-s', script]);
      if (r.status !== 0) throw new Error(`udhcpc failed: ${r.stdout} ${r.stderr}`);
      const env: Record<string, string> = {};
      for (const line of readFileSync(envFile, 'utf8').split('\n')) {
        const eq = line.indexOf('=');
        if (eq > 0) env[line.slice(0, eq)] = line.slice(eq + 1);
      }
      return env;
    },
    remove() {
      sh('ip', ['netns', 'del', name]);
      sh('ip', ['link', 'del', hostEnd]);
    },
  };
}

/**
 * Veth pairs whose peer sits alone in a new namespace: parents for macvlan and physical networks
 * whose traffic never leaves the test. removeAll() in `test.after.always` takes them all away.
 */
export class VethNamespaces {
  private readonly links: string[] = [];
  private readonly namespaces: string[] = [];

  /** A pair: `parent` stays on the host (down), its peer goes into a new namespace `ns` with `address`. */
  add(address: string): { parent: string; ns: string } {
    const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });
    const parent = uniqueName('p');
    const peer = uniqueName('q');
    const ns = uniqueName('n');
    ip('link', 'add', parent, 'type', 'veth', 'peer', 'name', peer);
    this.links.push(parent);
    ip('netns', 'add', ns);
    this.namespaces.push(ns);
    ip('link', 'set', peer, 'netns', ns);
    ip('-n', ns, 'addr', 'add', address, 'dev', peer);
    ip('-n', ns, 'link', 'set', peer, 'up');
    return { parent, ns };
  }

  removeAll(): void {
    for (const l of this.links.splice(0)) spawnSync('ip', ['link', 'del', l], { stdio: 'ignore' });
    for (const ns of this.namespaces.splice(0)) spawnSync('ip', ['netns', 'del', ns], { stdio: 'ignore' });
  }
}
