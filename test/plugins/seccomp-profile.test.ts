/**
 * The seccomp profile security.syscalls.* make, and the refusals that need no container: what liblxc
 * is given for each combination of keys, which combinations are refused, and which names are known.
 */
import test from 'ava';
import { checkSyscallConfig, interceptionPolicy, intercepts, seccompProfile, SYSCALL_KEYS } from '../../plugins/instance-lxc/seccomp-profile.js';
import { hostSyscallNames } from '../../plugins/instance-lxc/syscall-names.js';

const validate = (key: string, value: string) => SYSCALL_KEYS.find((k) => k.key === key)!.validate!(value);

test('the default profile is the reference\'s deny list; nothing filtered, no profile', (t) => {
  t.is(seccompProfile({}, 'x86_64'), '2\ndenylist\n[all]\nreject_force_umount\n[all]\nkexec_load errno 38\nopen_by_handle_at errno 38\ninit_module errno 38\nfinit_module errno 38\ndelete_module errno 38\n');
  t.is(seccompProfile({ 'security.syscalls.deny_default': 'false' }, 'x86_64'), undefined);
  t.is(seccompProfile({ 'security.syscalls.blacklist_default': '0' }, 'x86_64'), undefined);
});

test('deny lists, old names, compat and allow lists', (t) => {
  t.is(seccompProfile({ 'security.syscalls.deny_default': 'false', 'security.syscalls.deny': 'mkdir\n\n chroot ' }, 'x86_64'), '2\ndenylist\n[all]\nmkdir\nchroot\n');
  t.is(seccompProfile({ 'security.syscalls.deny_default': 'false', 'security.syscalls.blacklist': 'mkdir' }, 'x86_64'), '2\ndenylist\n[all]\nmkdir\n');
  t.regex(seccompProfile({ 'security.syscalls.deny_compat': 'true', 'security.syscalls.deny': 'chroot' }, 'x86_64')!, /\n\[x86_64\]\ncompat_sys_rt_sigaction errno 38\n(.*\n)*stub_x32_execveat errno 38\nchroot\n$/);
  // Compat entries exist on x86_64 only.
  t.is(seccompProfile({ 'security.syscalls.deny_default': 'false', 'security.syscalls.deny_compat': 'true' }, 'aarch64'), undefined);
  t.is(seccompProfile({ 'security.syscalls.allow': 'read\nwrite' }, 'x86_64'), '2\nallowlist\n[all]\nread\nwrite\n');
  t.is(seccompProfile({ 'security.syscalls.whitelist': 'read' }, 'x86_64'), '2\nallowlist\n[all]\nread\n');
});

test('interception marks mknod and setxattr notify and forbids nested listeners', (t) => {
  const mknod = seccompProfile({ 'security.syscalls.deny_default': 'false', 'security.syscalls.intercept.mknod': 'true' }, 'x86_64')!;
  t.regex(mknod, /mknod notify \[1,8192,SCMP_CMP_MASKED_EQ,61440\]\nmknod notify \[1,24576,SCMP_CMP_MASKED_EQ,61440\]\nmknodat notify \[2,8192/);
  t.regex(mknod, /seccomp errno 22 \[1,8,SCMP_CMP_MASKED_EQ,8\]/);
  t.notRegex(mknod, /setxattr/);
  const xattr = seccompProfile({ 'security.syscalls.deny_default': 'false', 'security.syscalls.intercept.setxattr': 'on' }, 'x86_64')!;
  t.regex(xattr, /setxattr notify \[3,1,SCMP_CMP_EQ\]/);
  t.notRegex(xattr, /mknod/);
  t.true(intercepts({ 'security.syscalls.intercept.setxattr': 'yes' }));
  t.false(intercepts({ 'security.syscalls.intercept.mknod': 'false' }));
});

test('combinations the reference refuses are 400s', (t) => {
  const refused = (config: Record<string, string>, re: RegExp) => {
    const err = t.throws(() => checkSyscallConfig(config), { message: re });
    t.is((err as { status?: number } | undefined)?.status, 400);
  };
  refused({ 'security.syscalls.deny': 'mkdir', 'security.syscalls.blacklist': 'mkdir' }, /old name "security\.syscalls\.blacklist"/);
  refused({ 'security.syscalls.deny_default': 'true', 'security.syscalls.blacklist_default': 'true' }, /old name/);
  refused({ 'security.syscalls.allow': 'read', 'security.syscalls.deny': 'mkdir' }, /cannot be used together/);
  refused({ 'security.syscalls.whitelist': 'read', 'security.syscalls.blacklist_compat': 'true' }, /cannot be used together/);
  // The reference takes deny_default beside an allow list (it does not apply there).
  t.notThrows(() => checkSyscallConfig({ 'security.syscalls.allow': 'read', 'security.syscalls.deny_default': 'false' }));
});

test('syscall names are checked against the host\'s tables; interceptions not done here are refused', (t) => {
  const names = hostSyscallNames();
  if (!names) {
    t.log('no kernel headers (linux-libc-dev): names are only checked for shape');
  } else {
    t.true(names.has('mkdir') && names.has('openat') && names.has('_llseek'));
    t.throws(() => validate('security.syscalls.deny', 'mkdir\nnotasyscall'), { message: /Unknown system call "notasyscall"/ });
  }
  t.notThrows(() => validate('security.syscalls.deny', 'mkdir\nchroot'));
  t.throws(() => validate('security.syscalls.allow', 'mkdir chroot'), { message: /not a system call name/ });
  t.notThrows(() => validate('security.syscalls.intercept.bpf', 'true'));
  t.notThrows(() => validate('security.syscalls.intercept.mount.fuse', ''));
  t.notThrows(() => validate('security.syscalls.intercept.mount.shift', 'true'));
  t.throws(() => validate('security.syscalls.intercept.mount.fuse', 'ext4=fuse2fs'), { message: /not available/ });
  t.notThrows(() => validate('security.syscalls.intercept.mount.allowed', 'ext4,hugetlbfs'));
  t.throws(() => validate('security.syscalls.intercept.mount.allowed', 'ext4,'), { message: /not a file system type name/ });
  t.throws(() => validate('security.syscalls.intercept.bpf', 'maybe'), { message: /boolean/ });
  t.false(SYSCALL_KEYS.some((k) => k.key === 'security.syscalls.intercept.sysinfo'), 'not a key of the reference 5.0');
});

test('sched_setscheduler and mount interception: the reference\'s lines in its order, the new mount API refused, the policy the proxy reads', (t) => {
  const all = seccompProfile({
    'security.syscalls.intercept.mknod': 'true', 'security.syscalls.intercept.sched_setscheduler': 'true',
    'security.syscalls.intercept.setxattr': 'true', 'security.syscalls.intercept.mount': 'true', 'security.syscalls.deny': 'chroot',
  }, 'x86_64')!;
  t.regex(all, /mknodat notify \[2,24576,SCMP_CMP_MASKED_EQ,61440\]\nsched_setscheduler notify\nsetxattr notify \[3,1,SCMP_CMP_EQ\]\nmount notify \[3,0,SCMP_CMP_MASKED_EQ,18446744070422410016\]\nfsopen errno 38\nfsconfig errno 38\nfsinfo errno 38\nfsmount errno 38\nfspick errno 38\nopen_tree errno 38\nmove_mount errno 38\nopenat2 errno 38\nchroot\n$/);
  t.true(intercepts({ 'security.syscalls.intercept.mount': 'true' }));
  t.true(intercepts({ 'security.syscalls.intercept.sched_setscheduler': '1' }));
  t.is(interceptionPolicy({ 'security.syscalls.intercept.mount': 'true', 'security.syscalls.intercept.mount.allowed': 'ext4,hugetlbfs' }), 'mount.allowed=ext4,hugetlbfs\n');
  t.is(interceptionPolicy({ 'security.syscalls.intercept.mount': 'true' }), 'mount.allowed=\n');
  t.is(interceptionPolicy({ 'security.syscalls.intercept.mount': 'true', 'security.syscalls.intercept.mount.allowed': 'ext4', 'security.syscalls.intercept.mount.shift': 'true' }), 'mount.allowed=ext4\nmount.shift=1\n');
  t.is(interceptionPolicy({ 'security.syscalls.intercept.mount.allowed': 'ext4' }), undefined, 'nothing intercepted: no policy');
  t.is(interceptionPolicy({ 'security.syscalls.intercept.bpf': 'true', 'security.syscalls.intercept.bpf.devices': 'true' }), 'bpf.devices=1\n');
  t.is(interceptionPolicy({ 'security.syscalls.intercept.bpf': 'true' }), undefined);
  t.regex(seccompProfile({ 'security.syscalls.intercept.bpf': 'true' }, 'x86_64')!, /\nbpf notify \[0,5,SCMP_CMP_EQ\]\nbpf notify \[0,8,SCMP_CMP_EQ\]\nbpf notify \[0,9,SCMP_CMP_EQ\]\n$/);
});
