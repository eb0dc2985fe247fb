import test from 'ava';
import path from 'node:path';
import { startTestKernel, type TestKernel } from '../../sdk/testing/index.js';
import { projectRoot } from '../helpers/daemon.js';

const registry = path.join(projectRoot, 'test', 'fixtures', 'registry.json');
const start = () => startTestKernel({ plugins: 'test', registry });

const seed = async (k: TestKernel) => {
  for (const [name, config, nictype] of [['alpha', { 'user.os': 'debian' }, 'bridged'], ['beta', { 'user.os': 'alpine linux' }, 'macvlan'], ['gamma', { 'user.os': 'debian' }, 'macvlan']] as const) {
    const r = await k.inject({ method: 'POST', url: '/1.0/probes', payload: { name, config, devices: { eth0: { nictype } } } });
    if (r.statusCode !== 200) throw new Error(r.body);
  }
};

test('collections answer recursion 0, 1 and 2', async (t) => {
  const k = await start();
  await seed(k);
  const urls = await k.inject({ url: '/1.0/probes' });
  t.deepEqual(urls.json.metadata, ['/1.0/probes/alpha', '/1.0/probes/beta', '/1.0/probes/gamma']);
  const full = await k.inject({ url: '/1.0/probes?recursion=1' });
  t.is(full.json.metadata[1].config['user.os'], 'alpine linux');
  t.is(full.json.metadata[1].state, undefined);
  const deep = await k.inject({ url: '/1.0/probes?recursion=2' });
  t.is(deep.json.metadata[0].state.status, 'Running');
  t.is((await k.inject({ url: '/1.0/probes?recursion=abc' })).statusCode, 400);
  await k.stop();
});

test('filter applies the grammar to config, devices and plain fields, at any recursion', async (t) => {
  const k = await start();
  await seed(k);
  const names = async (filter: string, recursion = 0) => {
    const r = await k.inject({ url: `/1.0/probes?recursion=${recursion}&filter=${encodeURIComponent(filter)}` });
    t.is(r.statusCode, 200, r.body);
    return recursion === 0 ? r.json.metadata : r.json.metadata.map((p: { name: string }) => p.name);
  };
  t.deepEqual(await names('config.user.os eq debian'), ['/1.0/probes/alpha', '/1.0/probes/gamma']);
  t.deepEqual(await names('config.user.os eq "alpine linux"', 1), ['beta']);
  t.deepEqual(await names('devices.eth0.nictype eq macvlan and not name eq beta', 1), ['gamma']);
  t.deepEqual(await names('name eq alpha or name eq beta and config.user.os eq debian', 1), ['alpha'], 'left associative');
  const bad = await k.inject({ url: `/1.0/probes?filter=${encodeURIComponent('name eq')}` });
  t.is(bad.statusCode, 400);
  t.is(bad.json.type, 'error');
  t.regex(bad.json.error, /filter/i);
  await k.stop();
});

test('filter values are RE2 patterns: linear in time, anchored as the reference, refused with 400 when too large', async (t) => {
  const k = await start();
  await seed(k);
  const patched = await k.inject({ method: 'PATCH', url: '/1.0/probes/beta', payload: { description: `${'a'.repeat(60)}!` } });
  t.is(patched.statusCode, 200, patched.body);
  const list = (filter: string) => k.inject({ url: `/1.0/probes?filter=${encodeURIComponent(filter)}` });
  // A backtracking engine would not answer this within the life of the test.
  const catastrophic = await list('description eq "(a+)+"');
  t.is(catastrophic.statusCode, 200, catastrophic.body);
  t.deepEqual(catastrophic.json.metadata, []);
  t.deepEqual((await list('description eq "(a+)+!"')).json.metadata, ['/1.0/probes/beta']);
  t.deepEqual((await list('name eq ^a')).json.metadata, ['/1.0/probes/alpha'], 'a value with ^ is not anchored at the end');
  t.deepEqual((await list('name eq "(?i)GAMMA"')).json.metadata, ['/1.0/probes/gamma']);
  t.deepEqual((await list('name eq "(a+"')).json.metadata, [], 'an invalid pattern is compared as text');
  const huge = await list(`name eq "${'x{2,1000}'.repeat(50)}"`);
  t.is(huge.statusCode, 400);
  t.is(huge.json.type, 'error');
  t.regex(huge.json.error, /^Invalid filter: .*too large/);
  await k.stop();
});

test('a filter past its bounds (field parts, nesting, comparisons) is a 400 naming the bound, at once', async (t) => {
  const k = await start();
  await seed(k);
  const list = (filter: string) => k.inject({ url: `/1.0/probes?filter=${encodeURIComponent(filter)}` });
  // Each of these took seconds per object or overflowed the parser's stack (a 500) before the bounds.
  const cases: [string, RegExp][] = [
    [`${Array(2000).fill('config').join('.')} eq x`, /more than 32 dot-separated parts/],
    [`${'('.repeat(7000)}name eq x${')'.repeat(7000)}`, /Nested too deeply/],
    [`${'not '.repeat(500)}name eq x`, /Nested too deeply/],
    [Array(500).fill('name eq x').join(' or '), /More than 128 comparisons/],
  ];
  for (const [filter, message] of cases) {
    const started = Date.now();
    const res = await list(filter);
    t.is(res.statusCode, 400, filter.slice(0, 40));
    t.is(res.json.type, 'error');
    t.regex(res.json.error, /^Invalid filter: /);
    t.regex(res.json.error, message);
    t.true(Date.now() - started < 2000, `${filter.slice(0, 40)} answered in ${Date.now() - started} ms`);
  }
  // At the bounds, filters still work: 32 parts (a config key with dots), 64 levels, 128 comparisons.
  t.is((await list(`${Array(32).fill('config').join('.')} eq x`)).statusCode, 200);
  t.deepEqual((await list(`${'('.repeat(64)}name eq alpha${')'.repeat(64)}`)).json.metadata, ['/1.0/probes/alpha']);
  t.deepEqual((await list([...Array(127).fill('name eq nothing'), 'name eq beta'].join(' or '))).json.metadata, ['/1.0/probes/beta']);
  await k.stop();
});

test('ETag on GET, If-Match on PUT and PATCH, PATCH merges maps', async (t) => {
  const k = await start();
  await seed(k);
  const got = await k.inject({ url: '/1.0/probes/alpha' });
  const etag = got.headers.etag as string;
  t.regex(etag, /^"[0-9a-f]{64}"$/);
  const stale = await k.inject({ method: 'PUT', url: '/1.0/probes/alpha', headers: { 'if-match': '"0000"' }, payload: { description: 'x' } });
  t.is(stale.statusCode, 412);
  t.is(stale.json.error_code, 412);
  const patched = await k.inject({ method: 'PATCH', url: '/1.0/probes/alpha', headers: { 'if-match': etag }, payload: { config: { 'user.extra': 'yes' } } });
  t.is(patched.statusCode, 200, patched.body);
  const after = await k.inject({ url: '/1.0/probes/alpha' });
  t.deepEqual(after.json.metadata.config, { 'user.os': 'debian', 'user.extra': 'yes' });
  t.deepEqual(after.json.metadata.devices, { eth0: { nictype: 'bridged' } }, 'fields not sent are kept');
  t.not(after.headers.etag, etag);
  // The old ETag no longer matches.
  t.is((await k.inject({ method: 'PATCH', url: '/1.0/probes/alpha', headers: { 'if-match': etag }, payload: { description: 'y' } })).statusCode, 412);
  // PUT replaces: config not sent is gone; unknown top-level fields (echoed by clients) are ignored.
  const put = await k.inject({ method: 'PUT', url: '/1.0/probes/alpha', payload: { description: 'new', name: 'alpha', status: 'whatever' } });
  t.is(put.statusCode, 200, put.body);
  t.deepEqual((await k.inject({ url: '/1.0/probe-alias/alpha' })).json.metadata.config, {}, 'aliases serve the same resource');
  t.is((await k.inject({ method: 'PATCH', url: '/1.0/probes/alpha', payload: [1] })).statusCode, 400);
  t.is((await k.inject({ method: 'PATCH', url: '/1.0/probes/alpha', payload: { config: { 'user.x': 5 } } })).statusCode, 400, 'the merged result is checked');
  // Setting a key to "" through PATCH unsets it.
  await k.inject({ method: 'PATCH', url: '/1.0/probes/alpha', payload: { config: { 'user.a': '1', 'user.b': '2' } } });
  await k.inject({ method: 'PATCH', url: '/1.0/probes/alpha', payload: { config: { 'user.a': '' } } });
  t.deepEqual((await k.inject({ url: '/1.0/probes/alpha' })).json.metadata.config, { 'user.b': '2' });
  await k.stop();
});

test('a route and its aliases hand handlers the parameters their paths fix, apart from the URL parameters', async (t) => {
  const k = await start();
  const answer = async (url: string) => {
    const r = await k.inject({ url });
    t.is(r.statusCode, 200, r.body);
    return r.json.metadata;
  };
  t.deepEqual(await answer('/1.0/probe-flavours/a'), { fixed: { flavour: 'plain' }, params: { name: 'a' } });
  t.deepEqual(await answer('/1.0/probe-sweet/b'), { fixed: { flavour: 'sweet' }, params: { name: 'b' } });
  t.deepEqual(await answer('/1.0/probe-flavourless/c'), { fixed: {}, params: { name: 'c' } }, 'a plain alias fixes nothing');
  await k.stop();
});

test('PATCH derived from PUT is serialised per object: concurrent PATCHes of distinct keys all land, through aliases too', async (t) => {
  const k = await start();
  await seed(k);
  const keys = Array.from({ length: 12 }, (_, i) => `user.k${i}`);
  const answers = await Promise.all(keys.map((key, i) => k.inject({
    method: 'PATCH', url: `/1.0/${i % 2 ? 'probe-alias' : 'probes'}/alpha`, payload: { config: { [key]: key } },
  })));
  for (const res of answers) t.is(res.statusCode, 200, res.body);
  const config = (await k.inject({ url: '/1.0/probes/alpha' })).json.metadata.config;
  for (const key of keys) t.is(config[key], key, `${key} was lost`);
  await k.stop();
});

test('a family publishes its own hook set; another plugin taps it, ordered by stage', async (t) => {
  const k = await start();
  await seed(k);
  t.deepEqual((await k.inject({ url: '/1.0/probes/alpha' })).json.metadata.decorated_by, ['probe', 'probe-addon']);
  await k.stop();
});

test('every error leaves as the envelope with an allowed status', async (t) => {
  const k = await start();
  await seed(k);
  const cases: [string, string, unknown, number][] = [
    ['GET', '/1.0/nope', undefined, 404],
    ['GET', '/2.0', undefined, 404],
    ['DELETE', '/1.0', undefined, 400],
    ['POST', '/1.0/operations', {}, 400],
    ['GET', '/1.0/probes/missing', undefined, 404],
    ['POST', '/1.0/probes', '{"name": ', 400],
    ['POST', '/1.0/probes', { name: 'alpha' }, 409],
    ['POST', '/1.0/probes', { name: 7 }, 400],
    ['POST', '/1.0/probes', { config: {} }, 400],
    ['PUT', '/1.0/probes/alpha', { config: { 'core.nonsense': 'x' } }, 400],
    ['PUT', '/1.0/probes/alpha', '[1,2', 400],
    ['GET', '/1.0/probes?project=bad/name', undefined, 400],
    ['GET', '/1.0/probes?target=elsewhere', undefined, 400],
    ['GET', '/1.0/events', undefined, 400],
  ];
  for (const [method, url, payload, status] of cases) {
    const r = await k.inject({ method, url, payload });
    t.is(r.statusCode, status, `${method} ${url}: ${r.body}`);
    t.is(r.json?.type, 'error', `${method} ${url}`);
    t.is(r.json?.error_code, status);
    t.true(typeof r.json?.error === 'string' && r.json.error.length > 0);
  }
  const huge = await k.inject({ method: 'POST', url: '/1.0/probes', payload: JSON.stringify({ name: 'x', description: 'a'.repeat(17 * 1024 * 1024) }) });
  t.is(huge.statusCode, 400);
  t.regex(huge.json.error, /too large/i);
  await k.stop();
});

test('task operations: 202 with Location, progress, success, failure, cancel, wait with timeout', async (t) => {
  const k = await start();
  await seed(k);
  const created = await k.inject({ method: 'POST', url: '/1.0/probes/alpha/jobs', payload: { ms: 50 } });
  t.is(created.statusCode, 202);
  t.is(created.json.type, 'async');
  t.is(created.json.status_code, 100);
  const url = created.headers.location as string;
  t.is(url, created.json.operation);
  t.is(created.json.metadata.class, 'task');
  t.deepEqual(created.json.metadata.resources, { probes: ['/1.0/probes/alpha'] });
  const waited = await k.inject({ url: `${url}/wait?timeout=10` });
  t.is(waited.json.metadata.status, 'Success');
  t.is(waited.json.metadata.status_code, 200);
  t.is(waited.json.metadata.metadata.result, 'done');
  t.is(waited.json.metadata.metadata.progress, 'started');

  const failing = await k.inject({ method: 'POST', url: '/1.0/probes/alpha/jobs', payload: { ms: 0, fail: true } });
  const failed = await k.inject({ url: `${failing.headers.location}/wait` });
  t.is(failed.json.metadata.status_code, 400);
  t.is(failed.json.metadata.err, 'probe job failed on purpose');

  // A failure quoting a lower layer's dump reaches the client filtered, as error envelopes are.
  const dump = 'options {"key":"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----"} \u001b[31mred\u001b[39m\n    at Object.<anonymous> (/x.js:1:1)';
  const leaking = await k.inject({ method: 'POST', url: '/1.0/probes/alpha/jobs', payload: { ms: 0, failWith: dump } });
  const leaked = await k.inject({ url: `${leaking.headers.location}/wait` });
  t.is(leaked.json.metadata.status_code, 400);
  t.notRegex(leaked.json.metadata.err, /PRIVATE KEY|MIIEvQ|\u001b|at Object/);
  t.regex(leaked.json.metadata.err, /^options /);

  const slow = await k.inject({ method: 'POST', url: '/1.0/probes/alpha/jobs', payload: { ms: 30000 } });
  const slowUrl = slow.headers.location as string;
  const before = Date.now();
  const timedOut = await k.inject({ url: `${slowUrl}/wait?timeout=1` });
  t.true(Date.now() - before >= 900);
  t.is(timedOut.json.metadata.status, 'Running');
  const list = await k.inject({ url: '/1.0/operations' });
  t.true(list.json.metadata.running.includes(slowUrl));
  t.true(list.json.metadata.success.includes(url));
  const listed = await k.inject({ url: '/1.0/operations?recursion=1' });
  t.is(listed.json.metadata.running.find((o: { id: string }) => slowUrl.endsWith(o.id)).may_cancel, true);
  t.is((await k.inject({ method: 'DELETE', url: slowUrl })).statusCode, 200);
  const cancelled = await k.inject({ url: `${slowUrl}/wait` });
  t.is(cancelled.json.metadata.status, 'Cancelled');
  t.is(cancelled.json.metadata.status_code, 401);
  t.is((await k.inject({ method: 'DELETE', url: slowUrl })).statusCode, 400, 'a finished operation cannot be cancelled');
  t.is((await k.inject({ url: '/1.0/operations/00000000-0000-0000-0000-000000000000' })).statusCode, 404);
  await k.stop();
});

test('token operations stay running until cancelled', async (t) => {
  const k = await start();
  await seed(k);
  const created = await k.inject({ method: 'POST', url: '/1.0/probes/alpha/token' });
  t.is(created.statusCode, 202);
  t.is(created.json.metadata.class, 'token');
  t.deepEqual(created.json.metadata.metadata, { probe: 'alpha' });
  const url = created.headers.location as string;
  t.is((await k.inject({ url: `${url}/wait?timeout=1` })).json.metadata.status, 'Running');
  t.is((await k.inject({ method: 'DELETE', url })).statusCode, 200);
  t.is((await k.inject({ url })).json.metadata.status_code, 401);
  await k.stop();
});

test('operations are listed per project unless all-projects', async (t) => {
  const k = await start();
  await k.inject({ method: 'POST', url: '/1.0/probes?project=p2', payload: { name: 'x' } });
  const op = await k.inject({ method: 'POST', url: '/1.0/probes/x/jobs?project=p2', payload: { ms: 5000 } });
  t.is(op.statusCode, 202, op.body);
  t.deepEqual((await k.inject({ url: '/1.0/operations' })).json.metadata, {});
  t.deepEqual((await k.inject({ url: '/1.0/operations?project=p2' })).json.metadata.running, [op.headers.location]);
  t.deepEqual((await k.inject({ url: '/1.0/operations?all-projects=true' })).json.metadata.running, [op.headers.location]);
  await k.inject({ method: 'DELETE', url: op.headers.location as string });
  await k.stop();
});

test('warnings raised through the sdk service are counted and listed', async (t) => {
  const k = await start();
  await seed(k);
  await k.inject({ method: 'POST', url: '/1.0/probes/alpha/warn' });
  await k.inject({ method: 'POST', url: '/1.0/probes/alpha/warn' });
  const list = await k.inject({ url: '/1.0/warnings?recursion=1' });
  t.is(list.json.metadata.length, 1);
  t.is(list.json.metadata[0].count, 2);
  t.is(list.json.metadata[0].entity_url, '/1.0/probes/alpha');
  await k.stop();
});

test('a body of only whitespace is no body, as for hand-read bodies; broken JSON is a 400 naming it', async (t) => {
  const k = await start();
  const empty = await k.inject({ method: 'POST', url: '/1.0/probes', payload: '', headers: { 'content-type': 'application/json' } });
  const blank = await k.inject({ method: 'POST', url: '/1.0/probes', payload: ' \n\t', headers: { 'content-type': 'application/json' } });
  t.is(blank.statusCode, empty.statusCode);
  t.is(blank.json.error, empty.json.error);
  const broken = await k.inject({ method: 'POST', url: '/1.0/probes', payload: '{"name":', headers: { 'content-type': 'application/json' } });
  t.is(broken.statusCode, 400);
  t.regex(broken.json.error, /^The request body is not valid JSON/);
  await k.stop();
});
