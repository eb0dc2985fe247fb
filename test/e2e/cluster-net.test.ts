/**
 * The cluster test network itself: daemons in their own namespaces on a private bridge, reachable over
 * their unix socket from here and over HTTPS through the bridge, and nothing left behind after teardown.
 */
import test from 'ava';
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { makeClusterNet, clusterNetUnavailable } from '../helpers/cluster-net.js';
import { lxcOk } from '../helpers/clients.js';

const skip = clusterNetUnavailable();

(skip ? test.skip : test)('members live in their own namespaces, reach each other and the host, and teardown removes everything', async (t) => {
  const net = makeClusterNet({ subnet: '10.19.2', block: 0, members: 2 });
  try {
    const [m1, m2] = net.members as [typeof net.members[0], typeof net.members[0]];
    t.is(m1.address, '10.19.2.2');
    t.is(m2.address, '10.19.2.3');
    t.is(net.hostAddress, '10.19.2.1');
    t.is(m1.exec(['busybox', 'ping', '-c1', '-W2', m2.address]).status, 0, 'member to member');
    t.is(m2.exec(['busybox', 'ping', '-c1', '-W2', net.hostAddress]).status, 0, 'member to host');

    const d1 = await net.startDaemon(m1);
    // The lxc client in the root namespace talks to it through the socket file.
    await lxcOk(t, d1.socket, 'config', 'set', 'core.https_address', `${m1.address}:8443`);
    // Its HTTPS listener is bound inside the namespace: reachable through the bridge, from here and from m2.
    const fromHost = spawnSync('curl', ['-sk', '--max-time', '5', `https://${m1.address}:8443/1.0`], { encoding: 'utf8' });
    t.is(JSON.parse(fromHost.stdout).metadata.auth, 'untrusted', fromHost.stderr);
    const fromPeer = m2.exec(['curl', '-sk', '--max-time', '5', `https://${m1.address}:8443/`]);
    t.regex(fromPeer.stdout, /"\/1.0"/, fromPeer.stderr);
    // Not in the root namespace: nothing listens on that port here.
    t.false(spawnSync('ss', ['-Hltn', 'sport = :8443'], { encoding: 'utf8' }).stdout.includes(m1.address));
    const pid = d1.child.pid!;
    t.true(spawnSync('ip', ['netns', 'pids', m1.ns], { encoding: 'utf8' }).stdout.split(/\s+/).includes(String(pid)));
  } finally {
    await net.teardown();
  }
  t.false(existsSync(`/sys/class/net/${net.bridge}`), 'bridge removed');
  for (const m of net.members) t.false(existsSync(`/run/netns/${m.ns}`), `${m.ns} removed`);
});

(skip ? test.skip : test)('a run that crashed is cleaned up by the next one of the same block', (t) => {
  const first = makeClusterNet({ subnet: '10.19.2', block: 1, members: 1 });
  // No teardown: the next network of this block removes the leftovers before making its own.
  const second = makeClusterNet({ subnet: '10.19.2', block: 1, members: 1 });
  t.is(second.bridge, first.bridge);
  t.is(second.members[0]!.exec(['busybox', 'ping', '-c1', '-W2', second.hostAddress]).status, 0);
  return second.teardown();
});
