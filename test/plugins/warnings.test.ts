import test from 'ava';
import { startTestKernel } from '../../sdk/testing/index.js';
import { WarningsServiceRef, type EventEnvelope } from '../../sdk/index.js';

const start = async () => {
  const k = await startTestKernel({ plugins: ['warnings'] });
  const service = k.kernel.services.get(WarningsServiceRef)!;
  const events: EventEnvelope[] = [];
  k.kernel.events.subscribe((e) => events.push(e), ['lifecycle']);
  return { k, service, events };
};

test('raised warnings are listed with the reference fields; raising again counts', async (t) => {
  const { k, service } = await start();
  await service.raise({ type: 'Missing cgroup controller', message: 'blkio is absent' });
  await service.raise({ type: 'Missing cgroup controller', message: 'blkio is still absent' });
  await service.raise({ type: 'Image unavailable', message: 'gone', project: 'p1', entityUrl: '/1.0/images/abc', severity: 'moderate' });
  const list = await k.inject({ url: '/1.0/warnings?recursion=1' });
  t.is(list.json.metadata.length, 2);
  const cgroup = list.json.metadata.find((w: { type: string }) => w.type === 'Missing cgroup controller');
  t.deepEqual(Object.keys(cgroup).sort(), ['count', 'entity_url', 'first_seen_at', 'last_message', 'last_seen_at', 'location', 'project', 'severity', 'status', 'type', 'uuid'].sort());
  t.is(cgroup.count, 2);
  t.is(cgroup.last_message, 'blkio is still absent');
  t.is(cgroup.status, 'new');
  t.is(cgroup.location, 'none');
  const urls = await k.inject({ url: '/1.0/warnings' });
  t.true(urls.json.metadata.every((u: string) => /^\/1\.0\/warnings\/[0-9a-f-]{36}$/.test(u)));
  // ?project= narrows to that project; server-wide warnings have no project.
  const p1 = await k.inject({ url: '/1.0/warnings?recursion=1&project=p1' });
  t.deepEqual(p1.json.metadata.map((w: { type: string }) => w.type), ['Image unavailable']);
  t.is(p1.json.metadata[0].severity, 'moderate');
  const filtered = await k.inject({ url: `/1.0/warnings?recursion=1&filter=${encodeURIComponent('severity eq moderate or status eq acknowledged')}` });
  t.is(filtered.json.metadata.length, 1);
  await k.stop();
});

test('acknowledge, reset, resolve and delete, with lifecycle events', async (t) => {
  const { k, service, events } = await start();
  await service.raise({ type: 'Thing', message: 'm' });
  const uuid = (await k.inject({ url: '/1.0/warnings' })).json.metadata[0].split('/').pop();
  const url = `/1.0/warnings/${uuid}`;
  const got = await k.inject({ url });
  t.is(got.json.metadata.uuid, uuid);
  t.regex(String(got.headers.etag), /^"[0-9a-f]{64}"$/);
  t.is((await k.inject({ method: 'PUT', url, payload: { status: 'acknowledged' } })).statusCode, 200);
  t.is((await k.inject({ url })).json.metadata.status, 'acknowledged');
  // Raised again while acknowledged: counted, still acknowledged.
  await service.raise({ type: 'Thing', message: 'again' });
  t.is((await k.inject({ url })).json.metadata.status, 'acknowledged');
  t.is((await k.inject({ method: 'PATCH', url, payload: { status: 'new' } })).statusCode, 200);
  t.is((await k.inject({ url })).json.metadata.status, 'new');
  await service.resolve('Thing');
  t.is((await k.inject({ url })).json.metadata.status, 'resolved');
  for (const status of ['resolved', 'bogus', '']) {
    const bad = await k.inject({ method: 'PUT', url, payload: { status } });
    t.is(bad.statusCode, 400, status);
  }
  t.is((await k.inject({ method: 'DELETE', url })).statusCode, 200);
  t.is((await k.inject({ url })).statusCode, 404);
  t.is((await k.inject({ method: 'DELETE', url })).statusCode, 404);
  t.is((await k.inject({ method: 'PUT', url, payload: { status: 'new' } })).statusCode, 404);
  const actions = events.map((e) => (e.metadata as { action: string; source: string }).action);
  t.deepEqual(actions, ['warning-acknowledged', 'warning-reset', 'warning-deleted']);
  t.true(events.every((e) => (e.metadata as { source: string }).source === url));
  await k.stop();
});
