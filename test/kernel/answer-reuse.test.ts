/**
 * Reads answered again from the last answer (VerbSpec.reuse, kernel/http/answer-reuse.ts): a real
 * pipeline on a real hapi server over a real sqlite store, its routes counting how often their
 * handlers run. A kept answer is taken again while nothing changed; any acknowledged write, a write
 * the store publishes from elsewhere, a running operation, a change of the route's own token or a
 * caller of another reach makes the next read afresh; an answer that overlapped a write is not kept.
 * A listener whose callers are all one (the unix socket's) takes kept answers by URL before making a
 * request, under the same rules, with the same headers; the operations listing is kept the same way.
 */
import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import bunyan from 'bunyan';
import { collection, notFound, type ApiResponse, type Collection } from '../../sdk/index.js';
import { RoutePipeline } from '../../kernel/http/pipeline.js';
import { createHapiServer, UNIX_CALLER } from '../../kernel/http/listeners.js';
import { ChangeActivity } from '../../kernel/change-activity.js';
import { DocumentStore } from '../../kernel/store/document-store.js';
import { OperationManager } from '../../kernel/operations/manager.js';
import { EventHub } from '../../kernel/events/hub.js';
import { operationRoutes } from '../../kernel/operations/routes.js';
import { requestAsSent } from '../helpers/raw-http.js';

const dir = mkdtempSync(path.join(tmpdir(), 'corral-answer-reuse-'));
const socket = path.join(dir, 'unix.socket');
/** The second listener: every caller is the unix socket's. */
const sameCallerSocket = path.join(dir, 'same.socket');
const log = bunyan.createLogger({ name: 'answer-reuse-test', level: 'fatal' });
const activity = new ChangeActivity();
let store: DocumentStore;
let things: Collection<{ note: string }>;
const ops = new OperationManager(new EventHub(() => 'none'), () => 'none', activity);

const runs = { things: 0, host: 0, missing: 0 };
/** Host state the `host` route shows, with the token its plugin would keep. */
let hostState = 'up';
let hostToken: string | undefined = '1';
/** Holds the next listing of things after its read, until released. */
let hold: { reached: () => void; release: Promise<void> } | undefined;

const pipeline = new RoutePipeline({
  log, checkProject: async () => undefined, projectsChecked: () => false, clustered: () => false, serverName: () => 'none',
  activity, storeRevision: () => store.revision(),
});
pipeline.add('test', {
  path: '/1.0/things',
  get: {
    conventions: ['recursion'],
    access: 'filtered',
    reuse: true,
    handler: async (req): Promise<ApiResponse> => {
      runs.things++;
      const all = await things.list('default');
      if (hold) {
        const h = hold;
        hold = undefined;
        h.reached();
        await h.release;
      }
      const seen = req.restrictedTo ? all.filter((s) => req.restrictedTo!.includes(s.doc.note)) : all;
      return collection(seen, (s) => `/1.0/things/${s.name}`, (s) => ({ name: s.name, note: s.doc.note }));
    },
  },
  post: {
    handler: async (req) => {
      const body = req.body as { name: string; note: string };
      await things.put('default', body.name, { note: body.note });
      return { kind: 'sync', metadata: {} };
    },
  },
});
pipeline.add('test', { path: '/1.0/host', get: { reuse: () => hostToken, handler: () => {
  runs.host++;
  return { kind: 'sync', metadata: { state: hostState } };
} } });
pipeline.add('test', { path: '/1.0/missing', get: { reuse: true, errors: [404], handler: () => {
  runs.missing++;
  throw notFound('Nothing here');
} } });
pipeline.add('test', { path: '/1.0/work', post: { answers: ['operation'], handler: (req) => {
  const { name, note } = req.body as { name: string; note: string };
  let finish!: () => void;
  const done = new Promise<void>((resolve) => (finish = resolve));
  working = { finish };
  return { kind: 'operation', operation: ops.create({ class: 'task', description: 'work', run: async () => {
    await things.put('default', name, { note });
    await done;
  } }) };
} } });
let working: { finish: () => void } | undefined;
for (const route of operationRoutes(ops)) pipeline.add('kernel', route);

const server = createHapiServer({ log, socketPath: socket });
// A caller sending `X-Test-Projects` is restricted to those projects (as a restricted certificate is).
pipeline.install(server, async (raw) => {
  const projects = raw.headers['x-test-projects'];
  return typeof projects === 'string' ? { ...UNIX_CALLER, projects: projects.split(',') } : UNIX_CALLER;
});

const sameCaller = createHapiServer({ log, socketPath: sameCallerSocket });
pipeline.install(sameCaller, { every: UNIX_CALLER });

test.before(async () => {
  store = await DocumentStore.open(path.join(dir, 'store.db'));
  things = store.namespace('test').collection('things');
  await things.put('default', 'a', { note: 'default' });
  pipeline.seal();
  await server.start();
  await sameCaller.start();
});
test.after.always(async () => {
  await server.stop({ timeout: 1_000 }).catch(() => undefined);
  await sameCaller.stop({ timeout: 1_000 }).catch(() => undefined);
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

const get = async (url: string, headers: Record<string, string> = {}) => {
  const answer = await requestAsSent(socket, url, headers);
  return { status: answer.status, body: JSON.parse(answer.body.toString()) as { metadata: unknown } };
};
const post = (url: string, body: unknown) => requestAsSent(socket, url, { 'Content-Type': 'application/json' }, 'POST', JSON.stringify(body));
const names = async (url = '/1.0/things?recursion=1', headers: Record<string, string> = {}) =>
  ((await get(url, headers)).body.metadata as { name: string; note: string }[]).map((t) => `${t.name}:${t.note}`);

test.serial('a read is answered again while nothing changed, and afresh after an acknowledged write', async (t) => {
  const before = runs.things;
  t.deepEqual(await names(), ['a:default']);
  t.deepEqual(await names(), ['a:default']);
  t.deepEqual(await names(), ['a:default']);
  t.is(runs.things - before, 1, 'the handler ran once for three equal reads');

  t.is((await post('/1.0/things', { name: 'b', note: 'default' })).status, 200);
  t.deepEqual(await names(), ['a:default', 'b:default'], 'the read after the write shows it');
  t.is(runs.things - before, 2);
  // Another URL is another answer.
  t.deepEqual((await get('/1.0/things')).body.metadata, ['/1.0/things/a', '/1.0/things/b']);
  t.is(runs.things - before, 3);
});

test.serial('a store change made outside any request is seen at the next read', async (t) => {
  await names();
  const before = runs.things;
  await things.put('default', 'a', { note: 'edited' });
  t.deepEqual(await names(), ['a:edited', 'b:default']);
  t.is(runs.things - before, 1);
});

test.serial('a restricted caller never gets what was kept for a caller of another reach', async (t) => {
  await things.put('default', 'c', { note: 'p1' });
  t.deepEqual(await names(), ['a:edited', 'b:default', 'c:p1']);
  t.deepEqual(await names('/1.0/things?recursion=1', { 'X-Test-Projects': 'p1' }), ['c:p1']);
  t.deepEqual(await names('/1.0/things?recursion=1', { 'X-Test-Projects': 'p1' }), ['c:p1']);
  t.deepEqual(await names(), ['a:edited', 'b:default', 'c:p1']);
});

test.serial('an answer made while a write landed is not taken again', async (t) => {
  let reached!: () => void;
  let release!: () => void;
  const atRead = new Promise<void>((resolve) => (reached = resolve));
  hold = { reached, release: new Promise((resolve) => (release = resolve)) };
  // This read (a URL not read before, so nothing is kept for it) lists things, then waits while a write lands.
  const slow = names('/1.0/things?recursion=1&slow=1');
  await atRead;
  t.is((await post('/1.0/things', { name: 'd', note: 'default' })).status, 200);
  release();
  t.false((await slow).includes('d:default'), 'the slow read shows the listing from before the write');
  const before = runs.things;
  t.true((await names('/1.0/things?recursion=1&slow=1')).includes('d:default'), 'the next read was made afresh');
  t.is(runs.things - before, 1);
});

test.serial('nothing is taken again while an operation runs, and the read after it ends is fresh', async (t) => {
  await names();
  const answer = await post('/1.0/work', { name: 'e', note: 'default' });
  t.is(answer.status, 202);
  const id = (JSON.parse(answer.body.toString()) as { metadata: { id: string } }).metadata.id;
  const before = runs.things;
  await names();
  await names();
  t.is(runs.things - before, 2, 'each read during the operation ran its handler');
  working!.finish();
  await ops.get(id)!.done();
  t.true((await names()).includes('e:default'));
  const after = runs.things;
  await names();
  t.is(runs.things - after, 0, 'kept again once the operation ended');
});

test.serial("a route's own token: a new token is a fresh answer, no token keeps nothing", async (t) => {
  const before = runs.host;
  t.deepEqual((await get('/1.0/host')).body.metadata, { state: 'up' });
  t.deepEqual((await get('/1.0/host')).body.metadata, { state: 'up' });
  t.is(runs.host - before, 1);
  hostState = 'down';
  hostToken = '2';
  t.deepEqual((await get('/1.0/host')).body.metadata, { state: 'down' });
  hostToken = undefined;
  await get('/1.0/host');
  await get('/1.0/host');
  t.is(runs.host - before, 4, 'without a token every read runs the handler');
});

test.serial('error answers are never kept', async (t) => {
  const before = runs.missing;
  t.is((await get('/1.0/missing')).status, 404);
  t.is((await get('/1.0/missing')).status, 404);
  t.is(runs.missing - before, 2);
});

test.serial('where every caller is one, a kept answer is taken by its URL, with the headers it was made with, under the same rules', async (t) => {
  const url = '/1.0/things?recursion=1&listener=same';
  const before = runs.things;
  const made = await requestAsSent(sameCallerSocket, url);
  const taken = await requestAsSent(sameCallerSocket, url);
  t.is(runs.things - before, 1, 'the second read was taken');
  t.is(made.status, 200);
  t.deepEqual(taken.headers, made.headers);
  t.true(taken.body.equals(made.body));
  t.true(made.headers.includes('content-type: application/json; charset=utf-8'));
  t.true(made.headers.includes(`content-length: ${made.body.length}`));
  // Kept on one listener, taken on the other: the URL and the caller's reach are the same.
  await requestAsSent(socket, url);
  t.is(runs.things - before, 1);

  t.is((await post('/1.0/things', { name: 'f', note: 'default' })).status, 200);
  const after = await requestAsSent(sameCallerSocket, url);
  t.true(after.body.toString().includes('"name":"f"'), 'the read after the write shows it');
  t.is(runs.things - before, 2);

  // The route's own token is read again when the answer is taken.
  const host = runs.host;
  hostToken = '10';
  hostState = 'up';
  await requestAsSent(sameCallerSocket, '/1.0/host');
  await requestAsSent(sameCallerSocket, '/1.0/host');
  t.is(runs.host - host, 1);
  hostToken = '11';
  hostState = 'gone';
  t.true((await requestAsSent(sameCallerSocket, '/1.0/host')).body.toString().includes('"gone"'));
  t.is(runs.host - host, 2);

  // Not while an operation runs.
  const work = await post('/1.0/work', { name: 'g', note: 'default' });
  const id = (JSON.parse(work.body.toString()) as { metadata: { id: string } }).metadata.id;
  const during = runs.things;
  await requestAsSent(sameCallerSocket, url);
  await requestAsSent(sameCallerSocket, url);
  t.is(runs.things - during, 2);
  working!.finish();
  await ops.get(id)!.done();
  t.true((await requestAsSent(sameCallerSocket, url)).body.toString().includes('"name":"g"'));
});

test.serial('the operations listing is kept until an operation changes, comes or goes', async (t) => {
  const listed = async () => {
    const answer = await requestAsSent(sameCallerSocket, '/1.0/operations?recursion=1');
    return (JSON.parse(answer.body.toString()) as { metadata: Record<string, { id: string; status: string }[]> }).metadata;
  };
  const statusOf = (all: Record<string, { id: string; status: string }[]>, id: string) => Object.values(all).flat().find((op) => op.id === id)?.status;
  const work = await post('/1.0/work', { name: 'h', note: 'default' });
  const id = (JSON.parse(work.body.toString()) as { metadata: { id: string } }).metadata.id;
  t.is(statusOf(await listed(), id), 'Running');
  working!.finish();
  await ops.get(id)!.done();
  t.is(statusOf(await listed(), id), 'Success', 'the listing after the end shows it');
  t.is(statusOf(await listed(), id), 'Success');
  // A finished operation leaves the listing after a few seconds: the kept listing goes with it.
  await new Promise((resolve) => setTimeout(resolve, 5_500));
  t.is(statusOf(await listed(), id), undefined);
});
