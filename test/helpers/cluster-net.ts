/**
 * A private test network for cluster members: one bridge in the root namespace with an address, and
 * network namespaces each joined to it by a veth pair, with corral daemons started inside them.
 *
 * Each caller names a /24 it owns (`10.19.2`) and a block of it (0-15): the block is a /28, so test
 * files of one helper can run side by side on disjoint blocks. Every name (bridge, veths, namespaces)
 * is derived from subnet and block: a run that crashed is cleaned up by the next run of the same
 * block, and two helpers with different subnets never clash. No packet leaves these links.
 *
 * The daemon's unix socket is a file in its data dir, reachable from the root namespace; its HTTPS
 * listener is reachable from the root namespace through the bridge.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { corrald, nodeFlags, superviseDaemon, killContainers, type Daemon } from './daemon.js';

export interface NetMember {
  /** 1-based index in the network. */
  index: number;
  /** The network namespace the member lives in. */
  ns: string;
  /** Its address on the bridge (no prefix length). */
  address: string;
  /** Run a command inside the namespace. */
  exec(cmd: string[]): { status: number | null; stdout: string; stderr: string };
}

export interface ClusterNet {
  bridge: string;
  /** The root namespace's address on the bridge (members reach the host there). */
  hostAddress: string;
  members: NetMember[];
  /** Start a corrald inside `member`'s namespace (its own data dir unless `dir` names one to reuse). */
  startDaemon(member: NetMember, opts?: { dir?: string; plugins?: string; args?: string[]; env?: NodeJS.ProcessEnv }): Promise<NetDaemon>;
  /** Kill every process in the namespaces, delete namespaces, veths and the bridge, remove data dirs. */
  teardown(): Promise<void>;
}

export interface NetDaemon extends Daemon {
  member: NetMember;
  /** SIGKILL the daemon alone (what it spawned, etcd included, is left as a crash leaves it). */
  kill9(): Promise<void>;
}

function ip(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync('ip', args, { encoding: 'utf8', timeout: 30_000 });
  return { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
}

function must(args: string[]): void {
  const r = ip(args);
  if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr.trim()}`);
}

/** Pids of every process whose network namespace is `ns`. */
function namespacePids(ns: string): number[] {
  return ip(['netns', 'pids', ns]).stdout.split(/\s+/).filter(Boolean).map(Number);
}

function killNamespace(ns: string): void {
  for (const pid of namespacePids(ns)) {
    try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
  }
}

/** Remove what a network of these names left (a crashed run of the same block). Synchronous: usable at exit. */
function removeLinks(names: { bridge: string; namespaces: string[]; hostEnds: string[] }): void {
  for (const ns of names.namespaces) {
    if (!existsSync(`/run/netns/${ns}`)) continue;
    killNamespace(ns);
    ip(['netns', 'del', ns]);
  }
  for (const link of [...names.hostEnds, names.bridge]) {
    if (existsSync(`/sys/class/net/${link}`)) ip(['link', 'del', link]);
  }
}

/**
 * A network of `members` namespaces on a fresh bridge. `subnet` is the caller's /24 as three octets
 * (`10.19.2`), `block` the /28 within it: the bridge gets `.16*block+1`, member i gets `.16*block+1+i`.
 */
export function makeClusterNet(opts: { subnet: string; block: number; members: number }): ClusterNet {
  if (!/^\d+\.\d+\.\d+$/.test(opts.subnet)) throw new Error(`subnet must be three octets: ${opts.subnet}`);
  if (!Number.isInteger(opts.block) || opts.block < 0 || opts.block > 15) throw new Error('block must be 0-15');
  if (opts.members < 1 || opts.members > 13) throw new Error('a /28 block holds 1-13 members');
  const octets = opts.subnet.split('.');
  // `c` + 2nd and 3rd octet + block: "c192b3" for 10.19.2 block 3; at most 15 chars with suffixes.
  const prefix = `c${octets[1]}${octets[2]}b${opts.block}`;
  const base = 16 * opts.block;
  const bridge = `${prefix}br`;
  const hostAddress = `${opts.subnet}.${base + 1}`;
  const indexes = Array.from({ length: opts.members }, (_, i) => i + 1);
  const names = {
    bridge,
    namespaces: indexes.map((i) => `${prefix}n${i}`),
    hostEnds: indexes.map((i) => `${prefix}h${i}`),
  };
  removeLinks(names);

  const dirs: string[] = [];
  const daemons = new Set<NetDaemon>();
  let tornDown = false;
  const atExit = () => removeLinks(names);
  process.once('exit', atExit);

  try {
    must(['link', 'add', bridge, 'type', 'bridge']);
    must(['addr', 'add', `${hostAddress}/28`, 'dev', bridge]);
    must(['link', 'set', bridge, 'up']);
  } catch (err) {
    removeLinks(names);
    throw err;
  }

  const members: NetMember[] = [];
  try {
    for (const i of indexes) {
      const ns = names.namespaces[i - 1]!;
      const hostEnd = names.hostEnds[i - 1]!;
      const inner = `${prefix}i${i}`;
      const address = `${opts.subnet}.${base + 1 + i}`;
      must(['netns', 'add', ns]);
      must(['link', 'add', hostEnd, 'type', 'veth', 'peer', 'name', inner]);
      must(['link', 'set', inner, 'netns', ns]);
      must(['link', 'set', hostEnd, 'master', bridge, 'up']);
      must(['-n', ns, 'link', 'set', 'lo', 'up']);
      must(['-n', ns, 'link', 'set', inner, 'name', 'eth0']);
      must(['-n', ns, 'addr', 'add', `${address}/28`, 'dev', 'eth0']);
      must(['-n', ns, 'link', 'set', 'eth0', 'up']);
      members.push({ index: i, ns, address, exec: (cmd) => ip(['netns', 'exec', ns, ...cmd]) });
    }
  } catch (err) {
    removeLinks(names);
    process.removeListener('exit', atExit);
    throw err;
  }

  const net: ClusterNet = {
    bridge,
    hostAddress,
    members,
    async startDaemon(member, startOpts = {}) {
      if (tornDown) throw new Error('the network was torn down');
      const dir = startOpts.dir ?? mkdtempSync(path.join(tmpdir(), `corral-${prefix}m${member.index}-`));
      if (!startOpts.dir) dirs.push(dir);
      const daemon = await startInNamespace(member, dir, startOpts);
      daemons.add(daemon);
      return daemon;
    },
    async teardown() {
      if (tornDown) return;
      tornDown = true;
      await Promise.all([...daemons].map((d) => d.stop().catch(() => undefined)));
      removeLinks(names);
      for (const dir of dirs) {
        killContainers(dir);
        rmSync(dir, { recursive: true, force: true });
      }
      process.removeListener('exit', atExit);
    },
  };
  return net;
}

async function startInNamespace(member: NetMember, dir: string, opts: { plugins?: string; args?: string[]; env?: NodeJS.ProcessEnv }): Promise<NetDaemon> {
  const socket = path.join(dir, 'unix.socket');
  // `ip netns exec` execs the command after entering the namespace: the child's pid is the daemon's. It
  // also mounts a fresh /sys in a mount namespace of its own, without the cgroup tree: the daemon must see
  // its containers' cgroups (their init, exec, state), so the shell mounts cgroup2 there before it execs.
  const command = [process.execPath, ...nodeFlags, corrald, '--dir', dir, '--plugins', opts.plugins ?? 'full', ...(opts.args ?? [])];
  const child: ChildProcess = spawn('ip', ['netns', 'exec', member.ns, 'sh', '-c', 'mount -t cgroup2 cgroup2 /sys/fs/cgroup && exec "$@"', 'sh', ...command], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, CORRAL_INIT_NETWORK: 'none', ...opts.env },
  });
  const { daemon, exited, hasExited } = await superviseDaemon(child, { dir, socket, where: ` in ${member.ns}`, stopBoundMs: 30_000, samePid: true });
  return {
    ...daemon,
    member,
    async kill9() {
      if (!hasExited()) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** Whether this host can make namespaces and bridges (root with iproute2): tests skip with the reason otherwise. */
export function clusterNetUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root to make network namespaces';
  if (spawnSync('ip', ['-V']).status !== 0) return 'needs iproute2 (ip)';
  return undefined;
}
