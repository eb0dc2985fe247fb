/**
 * The reference daemon (LXD 5.0.2) as the oracle for the cluster API's shapes: a one-member cluster of each,
 * on loopback addresses of their own, compared field by field (names, order, types), with the same
 * answers to the same mistakes.
 */
import test from 'ava';
import type { Daemon } from '../helpers/daemon.js';
import { referenceUnavailable, type ReferenceDaemon } from '../helpers/reference-daemon.js';
import { startClusteredPair } from '../helpers/reference-pair.js';

const missing = referenceUnavailable();
const interop = missing ? test.skip : test.serial;
if (missing) console.warn(`Skipping the cluster reference comparison: ${missing}`);

let ref: ReferenceDaemon;
let corral: Daemon;

test.before(async () => {
  if (missing) return;
  ({ ref, corral } = await startClusteredPair('127.0.19.64:8443', '127.0.19.65:8443'));
});

test.after.always(async () => {
  await Promise.all([ref?.stop(), corral?.stop()]);
});

/** The shape of a JSON value: keys in order with their types, recursively (values left out). */
function shape(value: unknown): unknown {
  if (Array.isArray(value)) return value.length ? [shape(value[0])] : [];
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, shape(v)]));
  return value === null ? 'null' : typeof value;
}

interop('GET /1.0/cluster, the members and one member have the reference\'s fields in its order (clustering, clustering_roles, clustering_architecture, clustering_failure_domains, clustering_description, clustering_config)', async (t) => {
  for (const url of ['/1.0/cluster', '/1.0/cluster/members', '/1.0/cluster/members?recursion=1', '/1.0/cluster/members/m1']) {
    const [theirs, ours] = await Promise.all([ref.request('GET', url), corral.request('GET', url)]);
    t.is(ours.status, theirs.status, url);
    t.deepEqual(shape(ours.json.metadata), shape(theirs.json.metadata), url);
  }
  const [theirs, ours] = await Promise.all([ref.request('GET', '/1.0/cluster/members/m1'), corral.request('GET', '/1.0/cluster/members/m1')]);
  for (const field of ['roles', 'failure_domain', 'description', 'config', 'groups', 'server_name', 'database', 'status', 'message', 'architecture']) {
    t.deepEqual(ours.json.metadata[field], theirs.json.metadata[field], field);
  }
  const [envTheirs, envOurs] = await Promise.all([ref.request('GET', '/1.0'), corral.request('GET', '/1.0')]);
  for (const field of ['server_clustered', 'server_name', 'server_event_mode']) {
    t.is(envOurs.json.metadata.environment[field], envTheirs.json.metadata.environment[field], field);
  }
});

interop('a join token operation carries what the reference\'s does (clustering_join_token)', async (t) => {
  const [theirs, ours] = await Promise.all([ref.request('POST', '/1.0/cluster/members', { server_name: 'm2' }), corral.request('POST', '/1.0/cluster/members', { server_name: 'm2' })]);
  t.is(ours.status, theirs.status);
  t.is(ours.json.type, theirs.json.type);
  const [op, refOp] = [ours.json.metadata, theirs.json.metadata];
  t.is(op.class, refOp.class);
  t.is(op.description, refOp.description);
  t.is(op.may_cancel, refOp.may_cancel);
  t.deepEqual(Object.keys(op.metadata), Object.keys(refOp.metadata));
  t.deepEqual(shape(op.metadata), shape(refOp.metadata));
  t.is(op.location, refOp.location);
});

interop('the same mistakes get the same statuses and messages (clustering_edit_roles)', async (t) => {
  const cases: [string, string, unknown][] = [
    ['GET', '/1.0/cluster/members/nope', undefined],
    ['PUT', '/1.0/cluster/members/m1', { description: '', failure_domain: 'default', roles: [], config: {}, groups: ['default'] }],
    ['POST', '/1.0/cluster/members/m1/state', { action: 'bogus' }],
    ['PUT', '/1.0/cluster', { enabled: true }],
  ];
  for (const [method, url, body] of cases) {
    const [theirs, ours] = await Promise.all([ref.request(method, url, body), corral.request(method, url, body)]);
    t.is(ours.status, theirs.status, `${method} ${url}`);
    t.is(ours.json.error, theirs.json.error, `${method} ${url}`);
  }
});
