/**
 * The liblxc driver's rules that need no container: which id maps liblxc can write for root, the
 * refusal of a start under another map with security.protection.shift, the owner of the instance
 * directory, and which raw.lxc lines the daemon refuses before liblxc is asked.
 */
import test from 'ava';
import { checkDelegated, buildIdmap, parseRawIdmap, type IdmapEntry } from '../../plugins/instance-lxc/idmap.js';
import { refuseShift } from '../../plugins/instance-lxc/shift-protection.js';
import { rootOwner } from '../../plugins/instance-lxc/instance-dir.js';
import { parseRawLxc } from '../../plugins/instance-lxc/raw-lxc.js';
import { checkKernelLimit, parseKernelLimit, prlimitLines } from '../../plugins/instance-lxc/kernel-limits.js';
import { hugepageLimit, hugepagesUnsupported } from '../../plugins/instance-lxc/hugepages.js';
import { CgroupHost } from '../../plugins/instance-lxc/cgroups.js';
import { claimsNamed } from '../helpers/claims.js';

const base = { uid: { start: 1_000_000, size: 1_000_000_000 }, gid: { start: 1_000_000, size: 1_000_000_000 } };
const delegated = { uid: [base.uid], gid: [base.gid] };
const root = { uid: 0, gid: 0 };
const map = (raw: string) => buildIdmap(base, parseRawIdmap(raw));

test('a uid map through root\'s own uid is written by liblxc itself: any host id goes', (t) => {
  t.notThrows(() => checkDelegated(map('both 0 0'), delegated, root));
  t.notThrows(() => checkDelegated(map('both 0-1 0-1'), delegated, root));
  // Root's uid mapped anywhere in the container, with other host ids beside it.
  t.notThrows(() => checkDelegated(map('uid 0 1000\ngid 5000 0'), delegated, root));
});

test('otherwise newuidmap/newgidmap rules hold: subordinate ids, or the caller\'s own id alone', (t) => {
  t.notThrows(() => checkDelegated(map(''), delegated, root));
  // The caller's own gid alone passes newgidmap.
  t.notThrows(() => checkDelegated(map('gid 0 0'), delegated, root));
  t.throws(() => checkDelegated(map('gid 0-1 0-1'), delegated, root), { message: /host gids 0-1, which \/etc\/subgid does not give to root \(add "root:0:2"/ });
  t.throws(() => checkDelegated(map('uid 5000 0'), delegated, root), { message: /host uid 5000, which \/etc\/subuid/ });
  // A daemon running as another user maps its own uid through newuidmap, not root's.
  t.throws(() => checkDelegated(map('both 0 0'), delegated, { uid: 1000, gid: 1000 }), { message: /host uid 0/ });
});

test('security.protection.shift (container_protection_shift) refuses a start whose map differs from the last start\'s', (t) => {
  const shared = { privileged: false, base: 0, map: map('') };
  const privileged = { privileged: true, base: 0, map: [] as IdmapEntry[] };
  const json = (m: IdmapEntry[]) => JSON.stringify(m);
  // Without the key anything goes.
  t.notThrows(() => refuseShift({}, shared));
  // Never started: the image's files are unmapped.
  t.throws(() => refuseShift({ 'security.protection.shift': 'true' }, shared), { message: /protected against id shifting/ });
  t.notThrows(() => refuseShift({ 'security.protection.shift': 'true' }, privileged));
  t.notThrows(() => refuseShift({ 'security.protection.shift': 'true', 'volatile.idmap.current': json(shared.map) }, shared));
  t.throws(() => refuseShift({ 'security.protection.shift': 'true', 'volatile.idmap.current': json(shared.map) }, privileged), { message: /none \(host ids as they are\) where its files were last used with "u 0 1000000/ });
  t.throws(() => refuseShift({ 'security.protection.shift': 'true', 'volatile.idmap.current': json(shared.map) }, { ...shared, map: map('both 0 0') }));
});

test('the instance directory belongs to the host id of the container\'s root', (t) => {
  t.deepEqual(rootOwner({ privileged: true, base: 0, map: [] }), { uid: 0, gid: 0 });
  t.deepEqual(rootOwner({ privileged: false, base: 0, map: map('') }), { uid: 1_000_000, gid: 1_000_000 });
  t.deepEqual(rootOwner({ privileged: false, base: 0, map: map('both 0 0') }), { uid: 0, gid: 0 });
  t.deepEqual(rootOwner({ privileged: false, base: 0, map: map('uid 0 0') }), { uid: 0, gid: 1_000_000 });
});

test('raw.lxc: the keys the reference forbids, compared without case; other lines are liblxc\'s to judge', (t) => {
  for (const [line, message] of [
    ['LXC.LOGFILE = x', /lxc\.logfile/], ['lxc.Log.Syslog = x', /syslog/], ['lxc.ephemeral = 1', /ephemeral/],
    ['lxc.prlimit.nofile = 1', /limits\.kernel/], ['lxc.Net.0.type = veth', /interface-specific/], ['lxc.net.0.ipv4.address.x = 1', /interface-specific/],
    ['lxc.uts.name', /Invalid raw\.lxc line/],
  ] as const) t.throws(() => parseRawLxc(line), { message }, line);
  for (const line of ['lxc.net.10.ipv6.gateway = fd00::2', 'lxc.net.0.ipv4.address = 10.0.0.1/24', 'notlxc.key = 1', '= novalue', 'lxc.notaconfigkey = 1', '# comment']) {
    t.notThrows(() => parseRawLxc(line), line);
  }
});

test('limits.kernel values (kernel_limits): unlimited, -1, a number or soft:hard; a soft limit above the hard one and other text refused', (t) => {
  t.deepEqual(parseKernelLimit('200'), { soft: 200n, hard: 200n });
  t.deepEqual(parseKernelLimit('unlimited'), { soft: undefined, hard: undefined });
  t.deepEqual(parseKernelLimit('-1'), { soft: undefined, hard: undefined });
  t.deepEqual(parseKernelLimit('10:unlimited'), { soft: 10n, hard: undefined });
  t.throws(() => parseKernelLimit('unlimited:10'), { message: /above its hard limit/ });
  t.throws(() => parseKernelLimit('300:100'), { message: /above its hard limit/ });
  for (const bad of ['', 'abc', '1.5', '-2', '1:2:3', '10k', '18446744073709551615']) t.throws(() => parseKernelLimit(bad), { message: /not a limit/ }, bad);
  t.throws(() => checkKernelLimit('limits.kernel.files', '5'), { message: /Unknown kernel limit "files"/ });
  t.deepEqual(prlimitLines({ 'limits.kernel.nproc': '-1', 'limits.kernel.nofile': '100:300', 'limits.kernel.core': '' }),
    ['lxc.prlimit.nofile = 100:300', 'lxc.prlimit.nproc = unlimited:unlimited']);
});

test('limits.hugepages (limits_hugepages): bytes per page size, and a host without the size or the controller named as the reason', (t) => {
  t.deepEqual(hugepageLimit('limits.hugepages.2MB', '64MiB'), { key: 'limits.hugepages.2MB', controller: 'hugetlb', v1: 'hugetlb.2MB.limit_in_bytes', v2: 'hugetlb.2MB.max', value: String(64 * 2 ** 20) });
  t.is(hugepageLimit('limits.hugepages.1GB', undefined).value, '');
  t.throws(() => hugepageLimit('limits.hugepages.2MB', '10%'), { message: /not a percentage/ });
  const none = new CgroupHost('cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0');
  t.regex(hugepagesUnsupported('limits.hugepages.2MB', none) ?? '', /no hugetlb cgroup controller/);
  const v1 = new CgroupHost('cgroup /sys/fs/cgroup/hugetlb cgroup rw,hugetlb 0 0');
  t.regex(hugepagesUnsupported('limits.hugepages.64KB', v1, '/nonexistent') ?? '', /no 64KB huge pages/);
});

test('every api extension the liblxc driver claims is named by a test title', (t) => {
  const { claims, unnamed } = claimsNamed('instance-lxc');
  t.true(claims.includes('kernel_limits') && claims.includes('limits_hugepages') && claims.includes('container_protection_shift'));
  t.deepEqual(unnamed, []);
});
