/**
 * The liblxc lines unix-char/unix-block nodes become at start (bind mount and device cgroup rule,
 * in the v1 form on hosts with the devices controller and the v2 form without it), and the host
 * ids a node gets through the container's map. The nodes themselves are tested on real
 * containers in test/e2e/unix-devices.test.ts.
 */
import test from 'ava';
import { renderConfig } from '../../plugins/instance-lxc/config-file.js';
import { CgroupHost } from '../../plugins/instance-lxc/cgroups.js';
import { hostId, hostNodePath, type RecordedUnixNode } from '../../plugins/instance-lxc/unix-nodes.js';

const inst = { project: 'default', name: 'u1c', type: 'container' as const, architecture: 'x86_64', config: {}, devices: {}, volumePath: '/nonexistent/u1c', logDir: '/nonexistent/log' };
const node: RecordedUnixNode = {
  device: 'disk', hotplugged: false, hostPath: '/var/lib/corral/devices/unix/u1c/unix.disk.dev-u1disk',
  node: { kind: 'b', major: 7, minor: 3, path: '/dev/u1disk', uid: 0, gid: 0, mode: 0o660 },
};
const map = [
  { Isuid: true, Isgid: false, Hostid: 100000, Nsid: 0, Maprange: 65536 },
  { Isuid: false, Isgid: true, Hostid: 200000, Nsid: 0, Maprange: 65536 },
];

function render(mounts: string): string {
  return renderConfig({ inst, rootfs: '/nonexistent/u1c/rootfs', mounts: [], unixNodes: [node], idmap: { privileged: false, base: 0, map }, limits: [], cgroups: new CgroupHost(mounts) });
}

test('a unix-block node is a bind mount at its path and a v1 devices rule on a host with the devices controller', (t) => {
  const text = render('cgroup /sys/fs/cgroup/devices cgroup rw,nosuid,nodev,noexec,relatime,devices 0 0\n');
  t.regex(text, /^lxc\.cgroup\.devices\.allow = b 7:3 rwm$/m);
  t.regex(text, /^lxc\.mount\.entry = \/var\/lib\/corral\/devices\/unix\/u1c\/unix\.disk\.dev-u1disk dev\/u1disk none bind,create=file 0 0$/m);
});

test('without a v1 devices controller the rule takes the cgroup2 form', (t) => {
  const text = render('cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n');
  t.regex(text, /^lxc\.cgroup2\.devices\.allow = b 7:3 rwm$/m);
  t.notRegex(text, /^lxc\.cgroup\.devices/m);
});

test('node owners go through the container map; a privileged container (no map) keeps them', (t) => {
  t.is(hostId(map, 1000, 'uid'), 101000);
  t.is(hostId(map, 5, 'gid'), 200005);
  t.is(hostId([], 1000, 'uid'), 1000);
  t.throws(() => hostId(map, 70000, 'uid'), { message: /outside the container's id map/ });
  t.regex(hostNodePath('/d', 'my dev', '/dev/a/b'), /^\/d\/unix\.my_dev\.dev-a-b\.[0-9a-f]{8}$/);
  t.not(hostNodePath('/d', 'a', '/dev/a-b'), hostNodePath('/d', 'a', '/dev/a/b'));
});
