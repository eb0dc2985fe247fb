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

test('security.protection.shift refuses a start whose map differs from the last start\'s', (t) => {
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
