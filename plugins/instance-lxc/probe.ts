/**
 * What the host's liblxc is and can do, probed once at boot: its version (`lxc-start --version`),
 * the liblxc API extensions the reference reports as `lxc_features` (looked up in the installed
 * library's own list of extension names), and whether containers can run here at all.
 */
import { existsSync } from 'node:fs';
import { access, readFile } from 'node:fs/promises';
import { arch } from 'node:os';
import { runRemembered, type HostTools } from '../../sdk/index.js';
import type { CgroupHost } from './cgroups.js';

/** The liblxc extensions the reference lists under environment.lxc_features. */
export const LXC_FEATURES = [
  'cgroup2', 'core_scheduling', 'devpts_fd', 'idmapped_mounts_v2', 'mount_injection_file',
  'network_gateway_device_route', 'network_ipvlan', 'network_l2proxy', 'network_phys_macvlan_mtu',
  'network_veth_router', 'pidfd', 'seccomp_allow_deny_syntax', 'seccomp_notify', 'seccomp_proxy_send_notify_fd',
] as const;

/** Any of the names, as a whole NUL-terminated string. */
const FEATURE_NAMES = new RegExp(`\\0(${LXC_FEATURES.join('|')})(?=\\0)`, 'g');

export interface LxcProbe {
  operational: boolean;
  /** Why not, when not. */
  reason?: string;
  version: string;
  features: Record<string, string>;
}

const MULTIARCH: Record<string, string> = {
  x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu', ppc64: 'powerpc64le-linux-gnu', s390x: 's390x-linux-gnu', riscv64: 'riscv64-linux-gnu', ia32: 'i386-linux-gnu', arm: 'arm-linux-gnueabihf',
};

export function liblxcCandidates(): string[] {
  const triplet = MULTIARCH[arch()];
  return [
    ...(triplet ? [`/usr/lib/${triplet}/liblxc.so.1`, `/lib/${triplet}/liblxc.so.1`] : []),
    '/usr/lib64/liblxc.so.1', '/usr/lib/liblxc.so.1', '/usr/local/lib/liblxc.so.1',
  ];
}

/**
 * liblxc answers `lxc_has_api_extension()` from a table of names compiled into the library: a
 * name is supported when it is there as a whole string.
 */
export function featuresOf(library: Buffer): Record<string, string> {
  // One pass over the library's ~1 MB for all the names (a search per name took twice as long at boot).
  const found = new Set<string>();
  for (const match of library.toString('latin1').matchAll(FEATURE_NAMES)) found.add(match[1]!);
  const out: Record<string, string> = {};
  for (const name of LXC_FEATURES) out[name] = String(found.has(name));
  return out;
}

/**
 * The feature names in the library: `grep -z -x` reads NUL-terminated records and matches whole ones.
 * Its answer is remembered while grep and the library are unchanged, and a first boot runs it beside
 * the event loop, where reading and scanning the ~1 MB library here held the loop ~3 ms. Read here
 * when grep cannot answer.
 */
export async function libraryFeatures(hostTools: HostTools, libraryFile: string): Promise<Record<string, string>> {
  const answer = await runRemembered(hostTools, 'grep', ['-a', '-z', '-x', '-E', LXC_FEATURES.join('|'), '--', libraryFile], {
    allowFailure: true, timeoutMs: 10_000, dependsOn: [libraryFile],
  }).catch(() => undefined);
  // 0: names found, 1: none; anything else is grep's trouble.
  if (answer && answer.exitCode <= 1) {
    const found = new Set(answer.stdout.split('\0'));
    return Object.fromEntries(LXC_FEATURES.map((name) => [name, String(found.has(name))]));
  }
  return featuresOf(await readFile(libraryFile));
}

export async function probeLxc(hostTools: HostTools, cgroups: CgroupHost): Promise<LxcProbe> {
  const notOperational = (reason: string, version = ''): LxcProbe => ({ operational: false, reason, version, features: {} });
  const libraryFile = liblxcCandidates().find((candidate) => existsSync(candidate));
  if (libraryFile === undefined) return notOperational('liblxc.so.1 was not found');
  // The features are looked up while lxc-start runs: both are on every boot's way to a serving socket.
  const features = libraryFeatures(hostTools, libraryFile).catch(() => undefined);
  let version = '';
  try {
    // The version is liblxc's: the answer holds while neither the tool nor the library changed.
    version = (await runRemembered(hostTools, 'lxc-start', ['--version'], { timeoutMs: 10_000, dependsOn: [libraryFile] })).stdout.trim();
  } catch (err) {
    return notOperational(`lxc-start does not run: ${(err as Error).message}`);
  }
  const found = await features;
  if (!found) return notOperational('liblxc.so.1 could not be read', version);
  if (!(await access('/proc/self/ns/user').then(() => true, () => false))) return notOperational('the kernel has no user namespaces', version);
  if (cgroups.v1.size === 0 && !cgroups.unifiedMount) return notOperational('no cgroup hierarchy is mounted', version);
  return { operational: true, version, features: found };
}

/**
 * The `environment` contribution: the driver is listed only when operational (`driver` joins the
 * operational drivers with " | ", as the reference does).
 */
export function lxcEnvironment(probe: () => LxcProbe | undefined) {
  return (env: Record<string, unknown>): Record<string, unknown> => {
    const p = probe();
    if (!p?.operational) return env;
    const join = (existing: unknown, value: string) => (typeof existing === 'string' && existing !== '' ? `${existing} | ${value}` : value);
    return { ...env, driver: join(env.driver, 'lxc'), driver_version: join(env.driver_version, p.version), lxc_features: { ...p.features } };
  };
}
