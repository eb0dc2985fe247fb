/**
 * `restricted` and the `restricted.*` keys: what an instance or a profile of a restricted project
 * may contain. Nothing here applies unless `restricted` is true; each key then has a safe default.
 * A refusal is a 400 naming the instance or profile, the offending key or device and the
 * restriction that forbids it.
 */
import path from 'node:path';
import { ApiError, truthy, type DeviceConfig, type InstanceType } from '../../../sdk/index.js';

export type ProjectConfig = Record<string, string>;

/** An instance (expanded) or a profile, as checked against the restrictions. */
export interface RestrictionSubject {
  kind: 'instance' | 'profile';
  name: string;
  /** `any` for a profile, which may apply to either type. */
  type: InstanceType | 'any';
  config: Record<string, string>;
  devices: Record<string, DeviceConfig>;
}

/** Each restriction's value when the project leaves it unset. */
export const RESTRICTION_DEFAULTS: Record<string, string> = {
  'restricted.backups': 'block',
  'restricted.snapshots': 'block',
  'restricted.cluster.target': 'block',
  'restricted.containers.nesting': 'block',
  'restricted.containers.privilege': 'unprivileged',
  'restricted.containers.lowlevel': 'block',
  'restricted.containers.interception': 'block',
  'restricted.virtual-machines.lowlevel': 'block',
  'restricted.devices.disk': 'managed',
  'restricted.devices.nic': 'managed',
};

/** Device types a restricted project may not use unless `restricted.devices.<type>` is `allow`. */
export const BLOCKABLE_DEVICES: Record<string, string> = {
  'unix-char': 'Unix character devices',
  'unix-block': 'Unix block devices',
  'unix-hotplug': 'Unix hotplug devices',
  infiniband: 'Infiniband devices',
  gpu: 'GPU devices',
  usb: 'USB devices',
  pci: 'PCI devices',
  proxy: 'Proxy devices',
};

/** Container keys that reach below the safety model (host ids, raw liblxc, kernel modules). */
const CONTAINER_LOWLEVEL = new Set([
  'boot.host_shutdown_timeout', 'linux.kernel_modules', 'raw.apparmor', 'raw.idmap', 'raw.lxc', 'raw.seccomp',
  'security.devlxd.images', 'security.idmap.base', 'security.idmap.size',
]);

const VM_LOWLEVEL = new Set(['boot.host_shutdown_timeout', 'limits.memory.hugepages', 'raw.apparmor', 'raw.idmap', 'raw.qemu', 'raw.qemu.conf']);

/** Interceptions considered safe enough for `restricted.containers.interception=allow`; the others need `full`. */
const SAFE_INTERCEPTS = new Set(['bpf', 'bpf.devices', 'mknod', 'mount', 'mount.fuse', 'setxattr'].map((s) => `security.syscalls.intercept.${s}`));
const INTERCEPT_PREFIX = 'security.syscalls.intercept.';

export const isRestricted = (config: ProjectConfig): boolean => truthy(config.restricted);

export function restriction(config: ProjectConfig, key: string): string {
  return config[key] || RESTRICTION_DEFAULTS[key] || (key.startsWith('restricted.devices.') ? 'block' : '');
}

/**
 * Whether a project may see and use a network: any, unless restricted; then only managed networks,
 * none while NICs are blocked, and only those `restricted.networks.access` names when it is set.
 */
export function networkAllowed(config: ProjectConfig, network: string, managed: boolean): boolean {
  if (!isRestricted(config)) return true;
  if (!managed || restriction(config, 'restricted.devices.nic') === 'block') return false;
  const access = config['restricted.networks.access'];
  return !access || listOf(access).includes(network);
}

/** Throws a 400 when the subject breaks one of the project's restrictions. */
export function checkRestrictions(project: string, config: ProjectConfig, subject: RestrictionSubject): void {
  if (!isRestricted(config)) return;
  const refuse = (what: string, key: string, extra = '') => {
    const label = subject.kind === 'profile' ? 'Profile' : subject.type === 'virtual-machine' ? 'Virtual machine' : 'Container';
    const setting = key.startsWith('restricted.idmap.') ? (config[key] ?? '') : restriction(config, key);
    throw new ApiError(400, `${label} "${subject.name}" of restricted project "${project}": ${what} (${key}=${setting || 'unset'})${extra}`);
  };
  if (subject.type !== 'virtual-machine') checkContainerConfig(config, subject, refuse);
  if (subject.type !== 'container') checkVirtualMachineConfig(config, subject, refuse);
  for (const [name, device] of Object.entries(subject.devices)) checkDevice(config, name, device, refuse);
}

type Refuse = (what: string, key: string, extra?: string) => never;

function checkContainerConfig(config: ProjectConfig, subject: RestrictionSubject, refuse: Refuse): void {
  const c = subject.config;
  if (truthy(c['security.nesting']) && restriction(config, 'restricted.containers.nesting') !== 'allow') {
    refuse('container nesting (security.nesting) is forbidden', 'restricted.containers.nesting');
  }
  const privilege = restriction(config, 'restricted.containers.privilege');
  if (truthy(c['security.privileged']) && privilege !== 'allow') {
    refuse('privileged containers (security.privileged) are forbidden', 'restricted.containers.privilege');
  }
  // An instance must be isolated outright; a profile only may not switch isolation off.
  const isolated = c['security.idmap.isolated'];
  if (privilege === 'isolated' && (subject.kind === 'instance' ? !truthy(isolated) : isolated !== undefined && !truthy(isolated))) {
    refuse('containers must set security.idmap.isolated=true', 'restricted.containers.privilege');
  }
  const lowlevel = restriction(config, 'restricted.containers.lowlevel');
  const interception = restriction(config, 'restricted.containers.interception');
  for (const [key, value] of Object.entries(c)) {
    if (key.startsWith(INTERCEPT_PREFIX)) {
      if (SAFE_INTERCEPTS.has(key)) {
        if (interception === 'block' && value !== '' && !isFalse(value)) refuse(`syscall interception (${key}) is forbidden`, 'restricted.containers.interception');
      } else if (interception !== 'full' && lowlevel !== 'allow') {
        refuse(`the low-level interception key "${key}" needs restricted.containers.interception=full`, 'restricted.containers.interception');
      }
      continue;
    }
    if (!CONTAINER_LOWLEVEL.has(key) || lowlevel === 'allow') continue;
    // Host ids inside the project's allowed ranges are the one low-level use a restricted project keeps.
    if (key === 'raw.idmap' && (config['restricted.idmap.uid'] || config['restricted.idmap.gid'])) {
      checkRawIdmap(config, value, refuse);
      continue;
    }
    refuse(`the low-level key "${key}" is forbidden`, 'restricted.containers.lowlevel');
  }
}

function checkVirtualMachineConfig(config: ProjectConfig, subject: RestrictionSubject, refuse: Refuse): void {
  if (restriction(config, 'restricted.virtual-machines.lowlevel') === 'allow') return;
  for (const key of Object.keys(subject.config)) {
    if (VM_LOWLEVEL.has(key)) refuse(`the low-level key "${key}" is forbidden`, 'restricted.virtual-machines.lowlevel');
  }
}

const isFalse = (v: string) => ['false', '0', 'no', 'off'].includes(v.toLowerCase());

/** `raw.idmap` lines (`uid|gid|both <host>[-<end>] <inside>[-<end>]`): every host range inside the allowed ones. */
function checkRawIdmap(config: ProjectConfig, value: string, refuse: Refuse): void {
  const allowed = { uid: parseRanges(config['restricted.idmap.uid'] ?? ''), gid: parseRanges(config['restricted.idmap.gid'] ?? '') };
  for (const line of value.split('\n').map((l) => l.trim()).filter(Boolean)) {
    const m = /^(uid|gid|both)\s+(\d+)(?:-(\d+))?\s+(\d+)(?:-(\d+))?$/.exec(line);
    if (!m) throw new ApiError(400, `Invalid raw.idmap line "${line}"`);
    const start = Number(m[2]);
    const end = m[3] === undefined ? start : Number(m[3]);
    for (const kind of m[1] === 'both' ? (['uid', 'gid'] as const) : [m[1] as 'uid' | 'gid']) {
      if (!allowed[kind].some(([lo, hi]) => start >= lo && end <= hi)) {
        refuse(`raw.idmap maps host ${kind}s ${start === end ? start : `${start}-${end}`} outside the allowed ranges`, `restricted.idmap.${kind}`);
      }
    }
  }
}

/** `1000-1999,3000`: inclusive ranges. Throws on bad syntax (used to validate the keys too). */
export function parseRanges(value: string): [number, number][] {
  if (value === '') return [];
  return value.split(',').map((part) => {
    const m = /^\s*(\d+)(?:-(\d+))?\s*$/.exec(part);
    if (!m) throw new Error(`"${part}" is not an id or an id range (start-end)`);
    const lo = Number(m[1]);
    const hi = m[2] === undefined ? lo : Number(m[2]);
    if (hi < lo) throw new Error(`"${part}" ends before it starts`);
    return [lo, hi] as [number, number];
  });
}

export const listOf = (value: string | undefined): string[] => (value ?? '').split(',').map((s) => s.trim()).filter(Boolean);

function checkDevice(config: ProjectConfig, name: string, device: DeviceConfig, refuse: Refuse): void {
  const at = ` on device "${name}"`;
  const type = device.type ?? '';
  if (type in BLOCKABLE_DEVICES) {
    if (restriction(config, `restricted.devices.${type}`) !== 'allow') refuse(`${BLOCKABLE_DEVICES[type]} are forbidden`, `restricted.devices.${type}`, at);
    return;
  }
  if (type === 'nic') {
    const mode = restriction(config, 'restricted.devices.nic');
    if (mode === 'block') refuse('network devices are forbidden', 'restricted.devices.nic', at);
    if (mode === 'managed' && !device.network) refuse('only NICs attached to a managed network (network=) are allowed', 'restricted.devices.nic', at);
    const access = config['restricted.networks.access'];
    if (access !== undefined && !listOf(access).includes(device.network ?? '')) {
      refuse(device.network ? `network "${device.network}" is not one this project may use` : 'a NIC must name one of the networks this project may use (network=)', 'restricted.networks.access', at);
    }
    return;
  }
  if (type === 'disk') {
    // The root disk always comes from a pool, and so does every managed disk.
    if (device.path === '/' && device.pool && !device.source) return;
    const mode = restriction(config, 'restricted.devices.disk');
    if (mode === 'block') refuse('disk devices other than the root disk are forbidden', 'restricted.devices.disk', at);
    if (device.pool) return;
    if (mode === 'managed') refuse('only disks backed by a storage pool are allowed', 'restricted.devices.disk', at);
    const allowed = listOf(config['restricted.devices.disk.paths']);
    if (allowed.length && !allowed.some((dir) => isWithin(device.source ?? '', dir))) {
      refuse(`source path "${device.source ?? ''}" is outside the allowed paths`, 'restricted.devices.disk.paths', at);
    }
  }
}

/** Whether `source`, normalised (no `..` escape), is `dir` or lies below it. */
function isWithin(source: string, dir: string): boolean {
  if (!source.startsWith('/')) return false;
  const clean = path.posix.normalize(source);
  const base = path.posix.normalize(dir).replace(/\/+$/, '') || '/';
  return clean === base || clean.startsWith(base === '/' ? '/' : `${base}/`);
}
