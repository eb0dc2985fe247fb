/**
 * Syscall policy: the security.syscalls.* keys and the liblxc seccomp profile (version 2 format,
 * `lxc.seccomp.profile`) they become, written at every start. Interception marks syscalls `notify`:
 * liblxc forwards them to the proxy (syscall-intercept.ts), which answers for the caller.
 */
import { badRequest, isBool, type ConfigKeyDescriptor, type Validator } from '../../sdk/index.js';
import { hostSyscallNames } from './syscall-names.js';

/** Syscall names of a list key: one a line (blank lines ignored). */
export function syscallList(value: string): string[] {
  return value.split('\n').map((l) => l.trim()).filter((l) => l !== '');
}

const isSyscallList: Validator = (value) => {
  const names = hostSyscallNames();
  for (const name of syscallList(value)) {
    if (!/^[a-z0-9_]+$/.test(name)) throw new Error(`"${name}" is not a system call name (give one name a line)`);
    if (names && !names.has(name)) throw new Error(`Unknown system call "${name}"`);
  }
};

/** Old names the reference still accepts beside the new ones (never both at once). */
export const SYSCALL_KEY_ALIASES: [string, string][] = [
  ['security.syscalls.deny_default', 'security.syscalls.blacklist_default'],
  ['security.syscalls.deny_compat', 'security.syscalls.blacklist_compat'],
  ['security.syscalls.deny', 'security.syscalls.blacklist'],
  ['security.syscalls.allow', 'security.syscalls.whitelist'],
];

export const SYSCALL_KEYS: ConfigKeyDescriptor[] = [
  { key: 'security.syscalls.deny_default', scope: 'instance', type: 'bool', default: 'true', validate: isBool, extension: 'container_syscall_filtering_allow_deny_syntax', doc: 'Deny the syscalls no container should make (kexec_load, open_by_handle_at, init_module, finit_module, delete_module) and forced umounts' },
  { key: 'security.syscalls.deny_compat', scope: 'instance', type: 'bool', default: 'false', validate: isBool, extension: 'container_syscall_filtering_allow_deny_syntax', doc: 'On x86_64, deny the compat (32-bit) entries most often used in exploits' },
  { key: 'security.syscalls.deny', scope: 'instance', type: 'string', validate: isSyscallList, extension: 'container_syscall_filtering_allow_deny_syntax', doc: 'Syscalls to deny, one name a line: a process that makes one is killed (SIGSYS), as with the reference' },
  { key: 'security.syscalls.allow', scope: 'instance', type: 'string', validate: isSyscallList, extension: 'container_syscall_filtering_allow_deny_syntax', doc: 'Syscalls to allow, one name a line: all others are refused (excludes security.syscalls.deny*)' },
  { key: 'security.syscalls.blacklist_default', scope: 'instance', type: 'bool', default: 'true', validate: isBool, extension: 'container_syscall_filtering', doc: 'Old name of security.syscalls.deny_default' },
  { key: 'security.syscalls.blacklist_compat', scope: 'instance', type: 'bool', default: 'false', validate: isBool, extension: 'container_syscall_filtering', doc: 'Old name of security.syscalls.deny_compat' },
  { key: 'security.syscalls.blacklist', scope: 'instance', type: 'string', validate: isSyscallList, extension: 'container_syscall_filtering', doc: 'Old name of security.syscalls.deny' },
  { key: 'security.syscalls.whitelist', scope: 'instance', type: 'string', validate: isSyscallList, extension: 'container_syscall_filtering', doc: 'Old name of security.syscalls.allow' },
  { key: 'security.syscalls.intercept.setxattr', scope: 'instance', type: 'bool', default: 'false', validate: isBool, extension: 'container_syscall_intercept', doc: 'Set the overlay "opaque" mark (trusted.overlay.opaque=y) for setxattr inside unprivileged containers, on directories the caller owns; other extended attributes are left to the kernel' },
  { key: 'security.syscalls.intercept.mknod', scope: 'instance', type: 'bool', default: 'false', validate: isBool, extension: 'container_syscall_intercept', doc: 'Create the harmless character devices (null, zero, full, random, urandom, tty, console, overlay whiteouts) for mknod/mknodat inside unprivileged containers; other devices are left to the kernel (which refuses them there)' },
];

/** File system type names, comma separated (as /proc/filesystems spells them). */
const isFsTypeList: Validator = (value) => {
  for (const name of value.split(',')) {
    if (!/^[a-z0-9][a-z0-9._+-]*$/.test(name)) throw new Error(`"${name}" is not a file system type name (give a comma separated list, e.g. "ext4,xfs")`);
  }
};

SYSCALL_KEYS.push(
  { key: 'security.syscalls.intercept.sched_setscheduler', scope: 'instance', type: 'bool', default: 'false', validate: isBool, extension: 'container_syscall_intercept_sched_setscheduler', doc: 'Let the root of an unprivileged container set any scheduling policy (realtime ones included) on its own processes through sched_setscheduler; other callers get the kernel\'s answer' },
  { key: 'security.syscalls.intercept.mount', scope: 'instance', type: 'bool', default: 'false', validate: isBool, extension: 'container_syscall_intercept_mount', doc: 'Mount, for an unprivileged container, new file systems of the types in security.syscalls.intercept.mount.allowed (in the caller\'s mount namespace, block devices only as the container can open them, always nodev); other types are left to the kernel' },
  { key: 'security.syscalls.intercept.mount.shift', scope: 'instance', type: 'bool', default: 'false', validate: isBool, extension: 'container_syscall_intercept_mount', doc: 'Idmap the file systems mounted through interception to the container (an idmapped mount: ids on disk are seen through the container\'s map); not for hugetlbfs, which belongs to the caller anyway' },
  { key: 'security.syscalls.intercept.bpf', scope: 'instance', type: 'bool', default: 'false', validate: isBool, extension: 'container_syscall_intercept_bpf_devices', doc: 'Intercept bpf program loads, attaches and detaches (what is served is set by security.syscalls.intercept.bpf.devices; the rest is the kernel\'s answer)' },
  { key: 'security.syscalls.intercept.bpf.devices', scope: 'instance', type: 'bool', default: 'false', validate: isBool, extension: 'container_syscall_intercept_bpf_devices', doc: 'With security.syscalls.intercept.bpf: load cgroup device programs for an unprivileged container and attach them to (or detach them from) its own cgroups' },
  { key: 'security.syscalls.intercept.mount.allowed', scope: 'instance', type: 'string', validate: isFsTypeList, extension: 'container_syscall_intercept_mount', doc: 'File system types the container may mount when security.syscalls.intercept.mount is true (comma separated); hugetlbfs is mounted owned by the caller' },
);

/**
 * Interceptions this server does not do: their keys are known so that a config naming them gets a
 * clear answer; "false" (or unset) is all they take.
 */
const notIntercepted = (what: string, kind: 'bool' | 'string'): Validator => (value) => {
  if (kind === 'bool') {
    isBool(value);
    if (!isTrue(value)) return;
  }
  if (value === '') return;
  throw new Error(`${what} is not available in this server (mknod, setxattr, sched_setscheduler, bpf device programs and mount of allowed types are intercepted)`);
};

const UNAVAILABLE: [string, string, 'bool' | 'string'][] = [
  ['mount.fuse', 'mounting through fuse', 'string'],
];

SYSCALL_KEYS.push(...UNAVAILABLE.map(([suffix, what, kind]): ConfigKeyDescriptor => ({
  key: `security.syscalls.intercept.${suffix}`, scope: 'instance', type: kind, ...(kind === 'bool' ? { default: 'false' } : {}),
  validate: notIntercepted(what, kind), doc: `Not available in this server: refused unless ${kind === 'bool' ? 'false' : 'empty'} (${what})`,
})));

function isTrue(v: string | undefined): boolean {
  return v !== undefined && ['true', '1', 'yes', 'on'].includes(v.toLowerCase());
}
const isFalse = (v: string | undefined) => v !== undefined && ['false', '0', 'no', 'off'].includes(v.toLowerCase());

/** The value of a key or its old name (at most one of them is set). */
function either(config: Record<string, string>, key: string): string | undefined {
  const old = SYSCALL_KEY_ALIASES.find(([k]) => k === key)?.[1];
  return config[key] || (old ? config[old] : undefined) || undefined;
}

/** Combinations the reference refuses: a key with its old name, an allow list with a deny list. */
export function checkSyscallConfig(config: Record<string, string>): void {
  for (const [key, old] of SYSCALL_KEY_ALIASES) {
    if (config[key] && config[old]) throw badRequest(`"${key}" and its old name "${old}" cannot both be set`);
  }
  const allow = either(config, 'security.syscalls.allow');
  const deny = either(config, 'security.syscalls.deny');
  const compat = either(config, 'security.syscalls.deny_compat');
  if (allow && (deny || compat)) {
    throw badRequest('"security.syscalls.allow" cannot be used together with "security.syscalls.deny" or "security.syscalls.deny_compat"');
  }
}

/** Whether the container's syscalls go to the notify proxy. */
export function intercepts(config: Record<string, string>): boolean {
  return ['mknod', 'setxattr', 'sched_setscheduler', 'mount', 'bpf'].some((k) => isTrue(config[`security.syscalls.intercept.${k}`]));
}

/**
 * What the proxy reads at each intercepted mount or bpf call (`mount.allowed=<types>`, `mount.shift=1`,
 * `bpf.devices=1`), or undefined when neither is intercepted.
 */
export function interceptionPolicy(config: Record<string, string>): string | undefined {
  const on = (key: string) => isTrue(config[`security.syscalls.intercept.${key}`]);
  const lines: string[] = [];
  if (on('mount')) {
    lines.push(`mount.allowed=${config['security.syscalls.intercept.mount.allowed'] ?? ''}`);
    if (on('mount.shift')) lines.push('mount.shift=1');
  }
  if (on('bpf') && on('bpf.devices')) lines.push('bpf.devices=1');
  return lines.length ? `${lines.join('\n')}\n` : undefined;
}

/** Entries the reference denies by default (ENOSYS), and forced umounts. */
const DEFAULT_DENY = ['kexec_load', 'open_by_handle_at', 'init_module', 'finit_module', 'delete_module'];

/**
 * 32-bit entry points of an x86_64 kernel most exploits went through. libseccomp does not know
 * these names: liblxc skips each with a warning, as it does for the reference's identical list.
 */
const COMPAT_DENY = [
  'compat_sys_rt_sigaction', 'stub_x32_rt_sigreturn', 'compat_sys_ioctl', 'compat_sys_readv', 'compat_sys_writev',
  'compat_sys_recvfrom', 'compat_sys_sendmsg', 'compat_sys_recvmsg', 'stub_x32_execve', 'compat_sys_ptrace',
  'compat_sys_rt_sigpending', 'compat_sys_rt_sigtimedwait', 'compat_sys_rt_sigqueueinfo', 'compat_sys_sigaltstack',
  'compat_sys_timer_create', 'compat_sys_mq_notify', 'compat_sys_kexec_load', 'compat_sys_waitid',
  'compat_sys_set_robust_list', 'compat_sys_get_robust_list', 'compat_sys_vmsplice', 'compat_sys_move_pages',
  'compat_sys_preadv64', 'compat_sys_pwritev64', 'compat_sys_rt_tgsigqueueinfo', 'compat_sys_recvmmsg',
  'compat_sys_sendmmsg', 'compat_sys_process_vm_readv', 'compat_sys_process_vm_writev', 'compat_sys_setsockopt',
  'compat_sys_getsockopt', 'compat_sys_io_setup', 'compat_sys_io_submit', 'stub_x32_execveat',
];

/** S_IFCHR and S_IFBLK under the S_IFMT mask: only device nodes are sent to the proxy. */
/** Values of size 1 only: the overlay "opaque" mark is "y". */
const NOTIFY_SETXATTR = ['setxattr notify [3,1,SCMP_CMP_EQ]'];

const NOTIFY_SCHED_SETSCHEDULER = ['sched_setscheduler notify'];

/**
 * Only mounts that make a new superblock: none of the flags outside the mask of plain mount
 * options (bind, move, remount, propagation changes) may be set. The new mount API is refused
 * (ENOSYS), as by the reference: its calls keep state across syscalls no proxy could follow.
 */
const NOTIFY_MOUNT = [
  'mount notify [3,0,SCMP_CMP_MASKED_EQ,18446744070422410016]',
  ...['fsopen', 'fsconfig', 'fsinfo', 'fsmount', 'fspick', 'open_tree', 'move_mount', 'openat2'].map((n) => `${n} errno 38`),
];

/** BPF_PROG_LOAD (5), BPF_PROG_ATTACH (8), BPF_PROG_DETACH (9). */
const NOTIFY_BPF = ['bpf notify [0,5,SCMP_CMP_EQ]', 'bpf notify [0,8,SCMP_CMP_EQ]', 'bpf notify [0,9,SCMP_CMP_EQ]'];

const NOTIFY_MKNOD = [
  'mknod notify [1,8192,SCMP_CMP_MASKED_EQ,61440]',
  'mknod notify [1,24576,SCMP_CMP_MASKED_EQ,61440]',
  'mknodat notify [2,8192,SCMP_CMP_MASKED_EQ,61440]',
  'mknodat notify [2,24576,SCMP_CMP_MASKED_EQ,61440]',
];

/**
 * A container that is intercepted may not install its own listener (SECCOMP_FILTER_FLAG_NEW_LISTENER)
 * or tracing filter: liblxc could not stack ours with it.
 */
const NO_NESTED_LISTENER = [
  'seccomp errno 22 [1,2146435072,SCMP_CMP_MASKED_EQ,2146435072]',
  'seccomp errno 22 [1,8,SCMP_CMP_MASKED_EQ,8]',
];

/** liblxc's section name for an architecture (the instance's). */
const SECTIONS: Record<string, string> = { x86_64: 'x86_64', aarch64: 'arm64', ppc64le: 'ppc64le', s390x: 's390x', i686: 'i386' };

/**
 * The profile text for a container, or undefined when nothing is filtered (no profile line at all,
 * which saves liblxc the work). The order is the reference's (compared in
 * test/e2e/syscall-policy-reference.test.ts): default entries, interception, compat section, then the
 * deny list, whose names take liblxc's default action for a deny list (the caller is killed with
 * SIGSYS) and, after a compat section, belong to that section as in the reference.
 */
export function seccompProfile(config: Record<string, string>, architecture: string): string | undefined {
  const allow = either(config, 'security.syscalls.allow');
  if (allow) return ['2', 'allowlist', '[all]', ...syscallList(allow), ''].join('\n');
  const header = ['2', 'denylist', '[all]'];
  const lines = [...header];
  const denyDefault = !isFalse(either(config, 'security.syscalls.deny_default'));
  if (denyDefault) lines.push('reject_force_umount', '[all]', ...DEFAULT_DENY.map((n) => `${n} errno 38`));
  if (intercepts(config)) lines.push(...NO_NESTED_LISTENER);
  if (isTrue(config['security.syscalls.intercept.mknod'])) lines.push(...NOTIFY_MKNOD);
  if (isTrue(config['security.syscalls.intercept.sched_setscheduler'])) lines.push(...NOTIFY_SCHED_SETSCHEDULER);
  if (isTrue(config['security.syscalls.intercept.setxattr'])) lines.push(...NOTIFY_SETXATTR);
  if (isTrue(config['security.syscalls.intercept.mount'])) lines.push(...NOTIFY_MOUNT);
  if (isTrue(config['security.syscalls.intercept.bpf'])) lines.push(...NOTIFY_BPF);
  if (isTrue(either(config, 'security.syscalls.deny_compat')) && architecture === 'x86_64') {
    lines.push(`[${SECTIONS[architecture]}]`, ...COMPAT_DENY.map((n) => `${n} errno 38`));
  }
  lines.push(...syscallList(either(config, 'security.syscalls.deny') ?? ''));
  return lines.length > header.length ? `${lines.join('\n')}\n` : undefined;
}
