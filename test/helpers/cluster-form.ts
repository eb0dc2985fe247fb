/**
 * Makes a cluster of the daemons of a cluster network through the real `lxc`: the first enables
 * clustering as m1, each other joins with a token as m2, m3, … (asked again within a bound while the
 * database settles its voters after the previous join), and all are online at the end.
 */
import type { NetDaemon } from './cluster-net.js';
import { lxc, lxcOk } from './clients.js';
import { waitFor } from './daemon.js';

interface Asserts {
  is(actual: unknown, expected: unknown, message?: string): unknown;
  log(...values: unknown[]): void;
  fail(message?: string): unknown;
}

const address = (m: NetDaemon) => `${m.member.address}:8443`;

export async function formCluster(t: Asserts, daemons: NetDaemon[]): Promise<void> {
  const [first, ...others] = daemons;
  await lxcOk(t, first!.socket, 'config', 'set', 'core.https_address', address(first!));
  await lxcOk(t, first!.socket, 'cluster', 'enable', 'm1');
  for (const [i, m] of others.entries()) {
    const name = `m${i + 2}`;
    await lxcOk(t, m.socket, 'config', 'set', 'core.https_address', address(m));
    const deadline = Date.now() + 30_000;
    for (;;) {
      await lxc(first!.socket, 'cluster', 'revoke-token', name);
      const token = (await lxcOk(t, first!.socket, 'cluster', 'add', name)).trim().split('\n').pop()!.trim();
      const required = JSON.parse(await lxcOk(t, first!.socket, 'query', '/1.0/cluster')).member_config;
      const body = { server_name: name, enabled: true, server_address: address(m), cluster_address: address(first!), cluster_token: token, member_config: required };
      const joined = await lxc(m.socket, 'query', '--wait', '-X', 'PUT', '-d', JSON.stringify(body), '/1.0/cluster');
      if (joined.status === 0) break;
      t.log(`${name} join refused: ${joined.stderr.trim()}`);
      if (Date.now() > deadline || !/quorum|learner/.test(joined.stderr)) {
        t.fail(`${name} could not join: ${joined.stderr}`);
        return;
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
  await waitFor(async () => (await first!.request('GET', '/1.0/cluster/members?recursion=1')).json?.metadata?.filter((m: any) => m.status === 'Online').length === daemons.length,
    15_000, `${daemons.length} members online`);
}
