/**
 * The cluster API on a server that is not clustered, through the real `lxc` client: what it answers,
 * what it refuses (with our 400s, never a 500), and the cluster keys' checks.
 */
import test from 'ava';
import { startDaemon, type Daemon } from '../helpers/daemon.js';
import { lxc, lxcOk } from '../helpers/clients.js';
import { claimsNamed } from '../helpers/claims.js';

let d: Daemon;
test.before(async () => {
  d = await startDaemon({});
});
test.after.always(async () => {
  await d?.stop();
});

test.serial('a standalone server answers GET /1.0/cluster as not enabled and refuses member calls', async (t) => {
  const cluster = await d.request('GET', '/1.0/cluster');
  t.is(cluster.status, 200);
  t.is(cluster.json.metadata.enabled, false);
  t.is(cluster.json.metadata.server_name, '');
  t.true(Array.isArray(cluster.json.metadata.member_config));
  const info = (await d.request('GET', '/1.0')).json.metadata;
  t.is(info.environment.server_clustered, false);
  t.true(info.api_extensions.includes('clustering_join_token'));

  const list = await lxc(d.socket, 'cluster', 'list');
  t.not(list.status, 0);
  t.regex(list.stderr, /isn't part of a cluster/);
  for (const [method, url, body] of [
    ['GET', '/1.0/cluster/members', undefined],
    ['GET', '/1.0/cluster/members/m1', undefined],
    ['POST', '/1.0/cluster/members', { server_name: 'm2' }],
    ['PUT', '/1.0/cluster/certificate', { cluster_certificate: 'x', cluster_certificate_key: 'y' }],
    ['POST', '/internal/cluster/accept', { server_name: 'm2', address: '10.19.2.9:8443', secret: 'x' }],
  ] as const) {
    const res = await d.request(method, url, body);
    t.is(res.status, 400, `${method} ${url}`);
    t.is(res.json.error, 'Server is not clustered');
  }
});

test.serial('enabling needs a name and an address other members can reach', async (t) => {
  const noName = await d.request('PUT', '/1.0/cluster', { enabled: true });
  t.is(noName.status, 400);
  t.is(noName.json.error, 'ServerName is required when enabling clustering');
  const badName = await d.request('PUT', '/1.0/cluster', { server_name: 'no/slash', enabled: true });
  t.is(badName.status, 400);
  t.regex(badName.json.error, /Invalid server name/);
  const reserved = await d.request('PUT', '/1.0/cluster', { server_name: 'none', enabled: true });
  t.is(reserved.status, 400);
  // Without core.https_address the server refuses at once, without starting anything.
  const enable = await lxc(d.socket, 'cluster', 'enable', 'm1');
  t.not(enable.status, 0);
  t.regex(enable.stderr, /Failed to configure cluster: Cannot use wildcard core.https_address ""/);
  const noAddress = await lxc(d.socket, 'query', '-X', 'PUT', '-d', JSON.stringify({ server_name: 'm1', enabled: true }), '/1.0/cluster');
  t.not(noAddress.status, 0);
  t.regex(noAddress.stderr, /Cannot use wildcard core.https_address ""/);
  await lxcOk(t, d.socket, 'config', 'set', 'core.https_address', '0.0.0.0:18443');
  const wildcard = await d.request('PUT', '/1.0/cluster', { server_name: 'm1', enabled: true });
  t.is(wildcard.status, 400);
  t.regex(wildcard.json.error, /Cannot use wildcard core.https_address "0.0.0.0:18443"/);
  await lxcOk(t, d.socket, 'config', 'unset', 'core.https_address');
  t.is((await d.request('GET', '/1.0/cluster')).json.metadata.enabled, false);
});

test.serial('a join is refused before it starts when its inputs cannot work', async (t) => {
  const base = { server_name: 'm2', enabled: true, server_address: '127.0.19.70:8443', cluster_address: '127.0.19.71:8443' };
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ ...base }, /join token is required/],
    [{ ...base, cluster_password: 'a trust password' }, /join token is not valid/],
    [{ ...base, server_address: '' , cluster_token: 'x' }, /No server address provided/],
    [{ ...base, cluster_token: Buffer.from(JSON.stringify({ server_name: 'm3', secret: 'a', fingerprint: 'b', addresses: [] })).toString('base64') }, /join token is for member "m3", not "m2"/],
    [{ ...base, cluster_token: Buffer.from(JSON.stringify({ server_name: 'm2', secret: 'a', fingerprint: 'b', addresses: [], expires_at: '2000-01-01T00:00:00Z' })).toString('base64') }, /expired/],
    [{ ...base, cluster_certificate: 'not a certificate', cluster_token: Buffer.from(JSON.stringify({ server_name: 'm2', secret: 'a', fingerprint: 'b', addresses: [] })).toString('base64') }, /not a valid PEM certificate/],
    [{ ...base, cluster_token: Buffer.from(JSON.stringify({ server_name: 'm2', secret: 'a', fingerprint: 'b', addresses: [] })).toString('base64') }, /does not listen on 127.0.19.70:8443/],
  ];
  for (const [body, message] of cases) {
    const res = await d.request('PUT', '/1.0/cluster', body);
    t.is(res.status, 400, JSON.stringify(body));
    t.regex(res.json.error, message);
  }
  t.is((await d.request('GET', '/1.0/cluster')).json.metadata.enabled, false);
});

test.serial('cluster keys are checked as the reference checks them', async (t) => {
  const refusedValues: [string, string][] = [
    ['cluster.max_voters', '4'],
    ['cluster.max_voters', '1'],
    ['cluster.max_standby', '6'],
    ['cluster.offline_threshold', '0'],
    ['cluster.offline_threshold', 'soon'],
    ['cluster.images_minimal_replica', '0'],
    ['cluster.join_token_expiry', '3 hours'],
    ['cluster.https_address', 'not an address:x'],
  ];
  for (const [key, value] of refusedValues) {
    const res = await lxc(d.socket, 'config', 'set', key, value);
    t.not(res.status, 0, `${key}=${value}`);
    t.regex(res.stderr, new RegExp(key.replace('.', '\\.')));
  }
  await lxcOk(t, d.socket, 'config', 'set', 'cluster.max_voters', '5');
  await lxcOk(t, d.socket, 'config', 'set', 'cluster.join_token_expiry', '1H30M');
  await lxcOk(t, d.socket, 'config', 'set', 'cluster.offline_threshold', '10');
  t.is((await lxcOk(t, d.socket, 'config', 'get', 'cluster.max_voters')).trim(), '5');
});

test('every api_extensions name the clustering plugin claims is exercised by a test that names it', (t) => {
  const { claims, unnamed } = claimsNamed('clustering');
  t.true(claims.length > 10);
  t.deepEqual(unnamed, []);
});
