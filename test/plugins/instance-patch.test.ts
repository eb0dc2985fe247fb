/**
 * PATCH of an instance is synchronous (200, as the reference answers it) and serialised per
 * instance: concurrent PATCHes of different keys all land, since each is merged into the instance
 * as it is when its turn comes; only a stale If-Match is refused (412). PATCH of other objects,
 * which the kernel derives from PUT, is serialised the same way.
 */
import test from 'ava';
import { startWithPool, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { callAndWait } from '../helpers/api.js';

let d: Daemon;

test.before(async () => {
  d = await startWithPool();
  const created = await callAndWait(d, 'POST', '/1.0/instances', { name: 'patched', source: { type: 'none' } });
  if (created.op?.status !== 'Success') throw new Error(`create failed: ${created.body} ${created.op?.err}`);
});
test.after.always(stopDaemons);

test.serial('PATCH of an instance answers 200 with a sync response', async (t) => {
  const res = await d.request('PATCH', '/1.0/instances/patched', { description: 'changed in place' });
  t.is(res.status, 200, res.body);
  t.is(res.json.type, 'sync');
  t.is((await d.request('GET', '/1.0/instances/patched')).json.metadata.description, 'changed in place');
  // The legacy path is the same route.
  t.is((await d.request('PATCH', '/1.0/containers/patched', { config: { 'user.legacy': 'yes' } })).status, 200);
});

test.serial('16 concurrent PATCHes of distinct user keys all land', async (t) => {
  const keys = Array.from({ length: 16 }, (_, i) => `user.k${i}`);
  const answers = await Promise.all(keys.map((key) => d.request('PATCH', '/1.0/instances/patched', { config: { [key]: key } })));
  for (const res of answers) t.is(res.status, 200, res.body);
  const config = (await d.request('GET', '/1.0/instances/patched')).json.metadata.config;
  for (const key of keys) t.is(config[key], key, `${key} was lost`);
  t.is(config['user.legacy'], 'yes');
});

test.serial('a stale If-Match gets 412 and changes nothing; a fresh one applies', async (t) => {
  const before = await d.request('GET', '/1.0/instances/patched');
  const etag = before.headers.etag as string;
  t.truthy(etag);
  t.is((await d.request('PATCH', '/1.0/instances/patched', { config: { 'user.first': '1' } }, { 'If-Match': etag })).status, 200);
  const stale = await d.request('PATCH', '/1.0/instances/patched', { config: { 'user.second': '2' } }, { 'If-Match': etag });
  t.is(stale.status, 412, stale.body);
  t.is(stale.json.type, 'error');
  const after = await d.request('GET', '/1.0/instances/patched');
  t.is(after.json.metadata.config['user.second'], undefined);
  t.is((await d.request('PATCH', '/1.0/instances/patched', { config: { 'user.second': '2' } }, { 'If-Match': after.headers.etag as string })).status, 200);
});

test.serial('16 concurrent PATCHes of a profile all land (the kernel serialises PATCH derived from PUT)', async (t) => {
  t.is((await d.request('POST', '/1.0/profiles', { name: 'busy' })).status, 200);
  const keys = Array.from({ length: 16 }, (_, i) => `user.p${i}`);
  const answers = await Promise.all(keys.map((key) => d.request('PATCH', '/1.0/profiles/busy', { config: { [key]: key } })));
  for (const res of answers) t.is(res.status, 200, res.body);
  const config = (await d.request('GET', '/1.0/profiles/busy')).json.metadata.config;
  for (const key of keys) t.is(config[key], key, `${key} was lost`);
});
