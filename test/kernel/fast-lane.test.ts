/**
 * The fast lane (kernel/http/fast-lane.ts, decision 0079): plain GETs are answered beside hapi, with
 * the very status, headers and bytes hapi would send, and never reach hapi; everything it leaves to
 * hapi does. A pipeline with routes of every answer kind is installed on a real hapi server on a unix
 * socket. A request carrying `If-None-Match` with a tag no answer has is one the fast lane leaves to
 * hapi, which answers it as if it were plain: that is the same request through both lanes.
 */
import test from 'ava';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import bunyan from 'bunyan';
import { collection, conflict, notFound, raw, redirect, type ApiResponse } from '../../sdk/index.js';
import { RoutePipeline } from '../../kernel/http/pipeline.js';
import { createHapiServer, UNIX_CALLER } from '../../kernel/http/listeners.js';
import { requestAsSent } from '../helpers/raw-http.js';

const dir = mkdtempSync(path.join(tmpdir(), 'corral-fast-lane-'));
const socket = path.join(dir, 'unix.socket');
const log = bunyan.createLogger({ name: 'fast-lane-test', level: 'fatal' });
const things = ['alpha', 'beta', 'gamma'];
let release: (() => void) | undefined;

const pipeline = new RoutePipeline({ log, checkProject: async () => undefined, projectsChecked: () => false, clustered: () => false, serverName: () => 'none' });
const sync = (metadata: unknown, extra: Partial<Extract<ApiResponse, { kind: 'sync' }>> = {}): ApiResponse => ({ kind: 'sync', metadata, ...extra });
pipeline.add('test', { path: '/1.0', get: { access: 'untrusted', handler: () => sync({ api_version: '1.0' }, { etag: { a: 1 } }) } });
pipeline.add('test', {
  path: '/1.0/things',
  get: { conventions: ['filter'], handler: () => collection(things, (x) => `/1.0/things/${x}`, (x, level) => ({ name: x, level })) },
  post: { errors: [409], handler: () => { throw conflict('taken'); } },
});
pipeline.add('test', { path: '/1.0/things/{name}', get: { errors: [404], handler: (req) => {
  if (!things.includes(req.params.name!)) throw notFound('Thing not found');
  return sync({ name: req.params.name, project: req.project, query: req.query }, { etag: req.params.name, location: `/1.0/things/${req.params.name}`, headers: { 'X-Thing': 'yes' } });
} } });
pipeline.add('test', { path: '/1.0/things/special', get: { handler: () => sync('the literal route wins') } });
pipeline.add('test', { path: '/1.0/things/{name}/text', get: { answers: ['raw'], handler: (req) => raw(`text of ${req.params.name}\n`, 'text/plain') } });
pipeline.add('test', { path: '/1.0/things/{name}/bytes', get: { answers: ['raw'], handler: () => raw(Buffer.from([0, 1, 2, 255]), 'application/octet-stream', { 'Content-Disposition': 'attachment' }) } });
pipeline.add('test', { path: '/1.0/things/{name}/stream', get: { answers: ['raw'], handler: () => raw(Readable.from([Buffer.from('one,'), Buffer.from('two')], { objectMode: false })) } });
pipeline.add('test', { path: '/1.0/moved', get: { answers: ['raw'], handler: () => redirect('/1.0/things') } });
pipeline.add('test', { path: '/1.0/broken', get: { handler: () => { throw new Error('a library said something internal'); } } });
pipeline.add('test', { path: '/1.0/slow', get: { handler: () => new Promise<ApiResponse>((resolve) => { release = () => resolve(sync('finished')); }) } });
pipeline.add('test', { path: '/1.0/bad-header', get: { handler: () => sync('x', { headers: { 'X-Bad': 'one\ntwo' } }) } });
/** 100 kept views (frozen, as the instances family hands back its recursion=1 views while they hold). */
const kept: Readonly<{ name: string; status: string }>[] = Array.from({ length: 100 }, (_, i) => Object.freeze({ name: `v${i}`, status: 'Stopped' }));
pipeline.add('test', { path: '/1.0/kept', get: { handler: () => collection([...kept], (v) => `/1.0/kept/${v.name}`, (v) => v) } });
/** A listing over the 8 MiB a body may be joined to: 90 views of ~100 KB, half kept, half made afresh. */
const bulky = Array.from({ length: 90 }, (_, i) => ({ name: `b${i}`, note: `${'é'.repeat(i)}${String(i % 10).repeat(100_000)}` }));
pipeline.add('test', { path: '/1.0/bulky', get: { handler: () => collection(bulky, (v) => `/1.0/bulky/${v.name}`, (v, level) => (level === 1 && Number(v.name.slice(1)) % 2 ? Object.freeze({ ...v }) : { ...v })) } });
pipeline.add('test', { path: '/1.0/secret', get: { handler: () => sync('for the trusted') } });
pipeline.add('test', { path: '/1.0/stream-events', websocket: { handler: () => undefined } as never });

const server = createHapiServer({ log, socketPath: socket, headers: () => ({ 'Access-Control-Allow-Origin': 'https://example.net' }) });
pipeline.install(server, async () => UNIX_CALLER);
let hapiAnswered = 0;
server.ext('onRequest', (_request, h) => {
  hapiAnswered++;
  return h.continue;
});

test.before(async () => {
  await server.start();
});
test.after.always(async () => {
  await server.stop({ timeout: 1_000 }).catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
});

const get = (url: string, headers: Record<string, string> = {}, method = 'GET', body?: string) => requestAsSent(socket, url, headers, method, body);

const viaHapi = (url: string) => get(url, { 'If-None-Match': '"no-answer-has-this-tag"' });

test.serial('plain reads are answered beside hapi with the bytes and headers hapi sends', async (t) => {
  const urls = [
    '/1.0', '/1.0/things', '/1.0/things?recursion=1', '/1.0/things?recursion=2', '/1.0/things?recursion=1&filter=name%20eq%20beta',
    '/1.0/things?recursion=x', '/1.0/things?filter=name%20eq', '/1.0/things/alpha', '/1.0/things/alpha?project=p1&recursion=1&recursion=2&x=1&x=2',
    '/1.0/things/omega', '/1.0/things/special', '/1.0/things/beta/text', '/1.0/things/beta/bytes', '/1.0/things/beta/stream',
    '/1.0/moved', '/1.0/broken', '/1.0/bad-header', '/1.0/things?project=bad%2Fname', '/1.0/things/alpha?target=elsewhere', '/1.0/stream-events', '/1.0/nowhere',
  ];
  for (const url of urls) {
    const before = hapiAnswered;
    const fast = await get(url);
    const taken = hapiAnswered === before;
    const slow = await viaHapi(url);
    t.is(hapiAnswered, before + 1 + (taken ? 0 : 1), `${url}: the forced request went through hapi`);
    t.deepEqual({ status: fast.status, headers: fast.headers, body: fast.body.toString('latin1') },
      { status: slow.status, headers: slow.headers, body: slow.body.toString('latin1') }, url);
  }
  // What the lane must have taken: every route of the pipeline a plain GET reaches, whatever it answered.
  for (const url of ['/1.0', '/1.0/things?recursion=1', '/1.0/things?recursion=1&filter=name%20eq%20beta', '/1.0/things/alpha', '/1.0/things/omega', '/1.0/things/beta/stream', '/1.0/broken', '/1.0/moved']) {
    const before = hapiAnswered;
    t.true((await get(url)).status > 0);
    t.is(hapiAnswered, before, `${url} was answered beside hapi`);
  }
  for (const url of ['/1.0/broken', '/1.0/bad-header']) {
    const broken = JSON.parse((await get(url)).body.toString());
    t.deepEqual([broken.error_code, broken.error], [500, 'Internal server error'], `${url}: a library's text never reaches the client`);
  }
});

test.serial('what the fast lane leaves to hapi reaches hapi', async (t) => {
  const cases: [string, Parameters<typeof get>][] = [
    ['HEAD', ['/1.0/things', {}, 'HEAD']],
    ['a trailing slash', ['/1.0/things/', {}]],
    ['an escape', ['/1.0/things/al%70ha', {}]],
    ['a dot segment', ['/1.0/things/./alpha', {}]],
    ['a browser origin', ['/1.0/things', { Origin: 'https://example.net' }]],
    ['a range', ['/1.0/things', { Range: 'bytes=0-3' }]],
    ['a body', ['/1.0/things', { 'Content-Type': 'application/json', 'Content-Length': '2' }, 'GET', '{}']],
    ['a chunked body', ['/1.0/things', { 'Transfer-Encoding': 'chunked' }, 'GET', '{}']],
    ['another method', ['/1.0/things', {}, 'POST', '{}']],
    ['a path no route has', ['/1.0/nowhere', {}]],
    ['a websocket route', ['/1.0/stream-events', {}]],
  ];
  for (const [what, args] of cases) {
    const before = hapiAnswered;
    await get(...args);
    t.is(hapiAnswered, before + 1, what);
  }
  const range = await get('/1.0/things', { Range: 'bytes=0-6' });
  t.is(range.status, 206, 'hapi still serves ranges');
  t.is(range.body.toString(), '{"type"');
  const tag = (await get('/1.0/things/alpha')).headers.find((h) => h.startsWith('etag: '))!.slice(6);
  t.is((await get('/1.0/things/alpha', { 'If-None-Match': tag })).status, 304, 'and conditional reads');
});

test.serial('a large listing of kept views reuses its last body only while every view is the same', async (t) => {
  const first = await get('/1.0/kept?recursion=1');
  const again = await get('/1.0/kept?recursion=1');
  t.deepEqual(again.body, first.body);
  kept[57] = Object.freeze({ name: 'v57', status: 'Running' });
  const changed = JSON.parse((await get('/1.0/kept?recursion=1')).body.toString()).metadata;
  t.is(changed[57].status, 'Running', 'a view that changed shows at once');
  t.is(changed.length, 100);
  kept.pop();
  t.is(JSON.parse((await get('/1.0/kept?recursion=1')).body.toString()).metadata.length, 99, 'and so does one that went');
  const viaHapi = await get('/1.0/kept?recursion=1', { 'If-None-Match': '"no-answer-has-this-tag"' });
  t.is(JSON.parse(viaHapi.body.toString()).metadata[57].status, 'Running');
});

test.serial('a listing too large to join whole is sent in slices, byte for byte the same in both lanes', async (t) => {
  const expected = JSON.stringify({ type: 'sync', status: 'Success', status_code: 200, operation: '', error_code: 0, error: '', metadata: bulky });
  t.true(Buffer.byteLength(expected) > 8 * 1024 * 1024, 'the listing is over the bound');
  for (const url of ['/1.0/bulky?recursion=1', '/1.0/bulky?recursion=2']) {
    const before = hapiAnswered;
    const fast = await get(url);
    t.is(hapiAnswered, before, `${url} was answered beside hapi`);
    const slow = await viaHapi(url);
    for (const answer of [fast, slow]) {
      t.is(answer.status, 200);
      t.is(answer.body.toString('utf8'), expected, `${url}: the whole envelope, in order`);
      t.true(answer.headers.includes(`content-length: ${answer.body.length}`), `${url}: its length told up front`);
      t.false(answer.headers.some((h) => h.startsWith('transfer-encoding')), `${url}: not chunked`);
    }
    t.deepEqual(fast.headers, slow.headers, `${url}: the same headers in both lanes`);
  }
});

test.serial('a stop lets the reads in flight finish before the connections close', async (t) => {
  const slow = get('/1.0/slow');
  while (!release) await new Promise((r) => setTimeout(r, 10));
  const stopped = server.stop({ timeout: 5_000 });
  await new Promise((r) => setTimeout(r, 100));
  release();
  const answer = await slow;
  t.is(answer.status, 200);
  t.is(JSON.parse(answer.body.toString()).metadata, 'finished');
  await stopped;
});
