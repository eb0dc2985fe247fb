/**
 * Cluster groups against the reference daemon (LXD 5.0.2): a one-member cluster of each on loopback
 * addresses of their own (127.0.25.1 and .2), the same requests to both, compared: field names and order,
 * statuses of the answers, the member's `groups`, the lifecycle event's context. Where the reference answers
 * a client's mistake with a 500 (a duplicate name, an unknown member) corral answers the 4xx that mistake
 * deserves; those cases are compared on meaning only.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { lxcEnv } from '../helpers/clients.js';
import { waitFor, type Daemon } from '../helpers/daemon.js';
import { referenceUnavailable, type ReferenceDaemon } from '../helpers/reference-daemon.js';
import { startClusteredPair } from '../helpers/reference-pair.js';

const missing = referenceUnavailable();
const interop = missing ? test.skip : test.serial;
if (missing) console.warn(`Skipping the cluster groups reference comparison: ${missing}`);

let ref: ReferenceDaemon;
let corral: Daemon;

test.before(async () => {
  if (missing) return;
  ({ ref, corral } = await startClusteredPair('127.0.25.1:8443', '127.0.25.2:8443'));
});

test.after.always(async () => {
  await Promise.all([ref?.stop(), corral?.stop()]);
});

const both = (method: string, url: string, body?: unknown) => Promise.all([ref.request(method, url, body), corral.request(method, url, body)]);

interop('the groups, one group and a member\'s groups answer as the reference\'s, through the same steps (clustering_groups)', async (t) => {
  const steps: [string, string, unknown?][] = [
    ['GET', '/1.0/cluster/groups'],
    ['GET', '/1.0/cluster/groups?recursion=1'],
    ['GET', '/1.0/cluster/groups/default'],
    ['POST', '/1.0/cluster/groups', { name: 'g1', description: 'first' }],
    ['POST', '/1.0/cluster/groups', { name: 'g2', members: ['m1'] }],
    ['GET', '/1.0/cluster/groups?recursion=1'],
    ['GET', '/1.0/cluster/members/m1'],
    ['PUT', '/1.0/cluster/groups/g1', { description: 'changed', members: ['m1'] }],
    ['PATCH', '/1.0/cluster/groups/g1', { description: 'patched' }],
    ['GET', '/1.0/cluster/groups/g1'],
    ['GET', '/1.0/cluster/members/m1'],
    ['PUT', '/1.0/cluster/members/m1', { description: '', failure_domain: 'default', roles: ['database'], config: {}, groups: ['g2', 'default'] }],
    ['GET', '/1.0/cluster/members/m1'],
    ['GET', '/1.0/cluster/groups/g1'],
    ['POST', '/1.0/cluster/groups/g1', { name: 'g3' }],
    ['GET', '/1.0/cluster/groups'],
    ['DELETE', '/1.0/cluster/groups/g3'],
    ['GET', '/1.0/cluster/groups'],
  ];
  for (const [method, url, body] of steps) {
    const [theirs, ours] = await both(method, url, body);
    const what = `${method} ${url} ${body ? JSON.stringify(body) : ''}`;
    if (method === 'POST') {
      // A creation or a rename: corral answers 200 with the new group's Location as all its creations do
      // (decision 0001); the reference answers both with 201.
      t.is(theirs.status, 201, `${what}: the reference's ${theirs.body}`);
      t.is(ours.status, 200, `${what}: ${ours.body}`);
      t.is(ours.headers.location, `/1.0/cluster/groups/${(body as any).name}`);
      continue;
    }
    t.is(ours.status, theirs.status, `${what}: ${ours.body}`);
    // The metadata itself: {} for an edit and a delete, the same lists and objects, keys in the same order
    // (a member's url differs by its address only).
    t.is(JSON.stringify(ours.json?.metadata).replaceAll('127.0.25.2', '127.0.25.1'), JSON.stringify(theirs.json?.metadata), what);
  }
});

interop('the same mistakes are refused with the same meaning; where the reference answers 500 for a client mistake corral answers a 4xx', async (t) => {
  const cases: [string, string, unknown, number?][] = [
    // [method, url, body, corral's status where the reference's is a 500]
    ['GET', '/1.0/cluster/groups/nope', undefined],
    ['POST', '/1.0/cluster/groups', {}],
    ['POST', '/1.0/cluster/groups', { name: 'default' }, 409],
    ['PUT', '/1.0/cluster/groups/nope', { description: 'x' }],
    ['PUT', '/1.0/cluster/groups/g2', { description: 'x', members: ['nope'] }],
    ['DELETE', '/1.0/cluster/groups/default', undefined],
    ['POST', '/1.0/cluster/groups/default', { name: 'x' }],
    ['PUT', '/1.0/cluster/members/m1', { description: '', failure_domain: 'default', roles: ['database'], config: {}, groups: [] }],
    ['PUT', '/1.0/cluster/members/m1', { description: '', failure_domain: 'default', roles: ['database'], config: {} }],
    ['POST', '/1.0/instances?target=@nope', { name: 'c1', source: { type: 'none' } }],
    ['POST', '/1.0/cluster/groups', { name: 'busy', members: ['m1'] }],
    ['DELETE', '/1.0/cluster/groups/busy', undefined, 400],
  ];
  for (const [method, url, body, ownStatus] of cases) {
    const [theirs, ours] = await both(method, url, body);
    const what = `${method} ${url} ${body ? JSON.stringify(body) : ''}`;
    if (method === 'POST' && theirs.status === 201) {
      t.is(ours.status, 200, `${what}: ${ours.body}`);
    } else if (ownStatus) {
      t.is(theirs.status, 500, `${what}: the reference's ${theirs.body}`);
      t.is(ours.status, ownStatus, `${what}: ${ours.body}`);
    } else {
      t.is(ours.status, theirs.status, `${what}: ours ${ours.body} theirs ${theirs.body}`);
    }
    if (theirs.status >= 400) t.log(`${what}\n  reference: ${theirs.json?.error}\n  corral:    ${ours.json?.error}`);
  }
  // The same wording where it says the same thing.
  const [theirs, ours] = await both('POST', '/1.0/instances?target=@nope', { name: 'c1', source: { type: 'none' } });
  t.is(ours.json.error, theirs.json.error);
  const [refEmpty, ownEmpty] = await both('PUT', '/1.0/cluster/members/m1', { description: '', failure_domain: 'default', roles: ['database'], config: {}, groups: [] });
  t.is(ownEmpty.json.error, refEmpty.json.error);
});

interop('the lifecycle events of group changes are the reference\'s: actions, sources and contexts, in order', async (t) => {
  const watch = (socket: string) => {
    const monitor = spawn('lxc', ['monitor', '--type', 'lifecycle', '--format', 'json'], { env: lxcEnv(socket) });
    let out = '';
    monitor.stdout.on('data', (c) => (out += c));
    return { monitor, events: () => out.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l).metadata) };
  };
  const [theirs, ours] = [watch(ref.socket), watch(corral.socket)];
  try {
    // lxc monitor connects in the background: a first change shows when both listen.
    await waitFor(async () => {
      await both('PUT', '/1.0/cluster/groups/default', { description: 'Default cluster group', members: ['m1'] });
      await new Promise((r) => setTimeout(r, 200));
      return theirs.events().length > 0 && ours.events().length > 0;
    }, 15_000, 'both monitors to listen');
    const before = [theirs.events().length, ours.events().length];
    const steps: [string, string, unknown?][] = [
      ['POST', '/1.0/cluster/groups', { name: 'ev' }],
      ['PUT', '/1.0/cluster/groups/ev', { description: 'watched', members: ['m1'] }],
      ['POST', '/1.0/cluster/groups/ev', { name: 'ev2' }],
      ['PUT', '/1.0/cluster/members/m1', { description: '', failure_domain: 'default', roles: ['database'], config: {}, groups: ['default'] }],
      ['DELETE', '/1.0/cluster/groups/ev2'],
    ];
    for (const [method, url, body] of steps) {
      const [a, b] = await both(method, url, body);
      t.true(a.status < 300 && b.status < 300, `${method} ${url}: ${a.body} ${b.body}`);
    }
    const seen = (events: any[]) => events.map((e) => ({ action: e.action, source: e.source, context: e.context ?? {} }));
    // The reference sends no event for a group's deletion; corral does (cluster-group-deleted, like every other delete).
    await waitFor(() => theirs.events().length >= before[0]! + steps.length - 1 && ours.events().length >= before[1]! + steps.length, 10_000, 'the events of every step')
      .catch((err) => {
        t.log(JSON.stringify(seen(theirs.events())), JSON.stringify(seen(ours.events())));
        throw err;
      });
    const [ref5, own5] = [seen(theirs.events().slice(before[0])), seen(ours.events().slice(before[1]))];
    t.deepEqual(own5.slice(0, -1), ref5);
    t.deepEqual(ref5.map((e) => e.action), ['cluster-group-created', 'cluster-group-updated', 'cluster-group-renamed', 'cluster-member-updated']);
    t.deepEqual(own5.at(-1), { action: 'cluster-group-deleted', source: '/1.0/cluster/groups/ev2', context: {} });
  } finally {
    theirs.monitor.kill();
    ours.monitor.kill();
  }
});
