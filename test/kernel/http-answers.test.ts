/**
 * Every answer, from every layer (node's parser, hapi, ws, the pipeline), is the JSON error envelope
 * and reaches the client: unknown methods, malformed upgrades, broken framing, oversize bodies that a
 * client writes whole before reading.
 */
import test from 'ava';
import { startDaemon, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { rawExchange, upgradeRequest, type RawAnswer } from '../helpers/raw-http.js';

test.after.always(stopDaemons);

let d: Daemon;
test.before(async () => {
  d = await startDaemon({ plugins: 'edge' });
});

function isEnvelope(t: import('ava').ExecutionContext, res: RawAnswer, status: number, what: string): void {
  t.is(res.status, status, `${what}: ${res.text.slice(0, 300)}`);
  t.regex(res.text, /\r\ncontent-type: application\/json/i, what);
  t.is(res.json?.type, 'error', what);
  t.is(res.json?.error_code, status, what);
  t.true(typeof res.json?.error === 'string' && res.json.error.length > 0, `${what}: a message`);
  t.notRegex(res.json?.error ?? '', /HPE_|Invalid Upgrade header|Payload content length/, `${what}: our words, not a library's`);
}

const H = 'Host: corral\r\n';

test('requests the HTTP parser refuses get the envelope', async (t) => {
  const cases: [string, string][] = [
    ['unknown method', `FOO /1.0 HTTP/1.1\r\n${H}\r\n`],
    ['bad Content-Length', `PUT /1.0 HTTP/1.1\r\n${H}Content-Length: abc\r\n\r\n{}`],
    ['two Content-Lengths', `PUT /1.0 HTTP/1.1\r\n${H}Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}`],
    ['bad chunk size', `PUT /1.0 HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`],
    ['chunk longer than announced', `PUT /1.0 HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n2\r\n{}XX\r\n0\r\n\r\n`],
    ['very long URL', `GET /1.0/${'a'.repeat(100_000)} HTTP/1.1\r\n${H}\r\n`],
    ['very long header', `GET /1.0 HTTP/1.1\r\n${H}X-Long: ${'a'.repeat(100_000)}\r\n\r\n`],
    ['NUL in the path', `GET /1.0\0 HTTP/1.1\r\n${H}\r\n`],
  ];
  for (const [what, bytes] of cases) isEnvelope(t, await rawExchange(d.socket, [bytes]), 400, what);
});

test('request targets hapi or URL parsing would refuse get the envelope in our words', async (t) => {
  const cases: [string, string, RegExp][] = [
    ['invalid percent-encoding in the path', `GET /1.0/instances/%zz HTTP/1.1\r\n${H}\r\n`, /percent-encoding/],
    ['invalid UTF-8 in the path', `GET /1.0/instances/%ff%fe HTTP/1.1\r\n${H}\r\n`, /percent-encoding/],
    ['asterisk form', `GET * HTTP/1.1\r\n${H}\r\n`, /request target/],
  ];
  for (const [what, bytes, message] of cases) {
    const res = await rawExchange(d.socket, [bytes]);
    isEnvelope(t, res, 400, what);
    t.regex(res.json?.error ?? '', message, what);
  }
  // An invalid escape in the query is a value like any other: the parameter says what is wrong with it.
  const query = await rawExchange(d.socket, [`GET /1.0/instances?recursion=%zz HTTP/1.1\r\n${H}\r\n`]);
  isEnvelope(t, query, 400, 'invalid percent-encoding in the query');
  t.regex(query.json.error, /recursion/);
  // HEAD answers carry no body, but their status is the GET's.
  t.regex((await rawExchange(d.socket, [`HEAD /1.0/instances/%zz HTTP/1.1\r\n${H}\r\n`])).text, /^HTTP\/1\.1 400 /);
  t.regex((await rawExchange(d.socket, [`HEAD /1.0 HTTP/1.1\r\n${H}\r\n`])).text, /^HTTP\/1\.1 200 /);
});

test('malformed websocket upgrades get the envelope', async (t) => {
  const cases: [string, string][] = [
    ['Upgrade is not websocket', upgradeRequest('/1.0/events', { Upgrade: 'foo' })],
    ['no key', upgradeRequest('/1.0/events', { 'Sec-WebSocket-Key': '' })],
    ['bad key', upgradeRequest('/1.0/events', { 'Sec-WebSocket-Key': 'short' })],
    ['bad version', upgradeRequest('/1.0/events', { 'Sec-WebSocket-Version': '99' })],
    ['bad subprotocol list', upgradeRequest('/1.0/events', { 'Sec-WebSocket-Protocol': ',,,' })],
    ['bad escape in an upgrade path', upgradeRequest('/1.0/operations/%zz/websocket?secret=x')],
  ];
  for (const [what, bytes] of cases) isEnvelope(t, await rawExchange(d.socket, [bytes]), 400, what);
  // A websocket upgrade on a path that has none is a plain request, as in the reference.
  isEnvelope(t, await rawExchange(d.socket, [upgradeRequest('/1.0/nowhere')]), 404, 'upgrade of an unknown path');
  const plain = await rawExchange(d.socket, [upgradeRequest('/1.0')]);
  t.is(plain.status, 200);
  t.is(plain.json?.type, 'sync');
});

test('an oversize body written whole before reading gets the envelope, and the connection stays usable', async (t) => {
  const body = Buffer.from(JSON.stringify({ config: { 'user.big': 'x'.repeat(50 * 1024 * 1024) } }));
  const next = `GET /1.0 HTTP/1.1\r\n${H}\r\n`;
  const declared = await rawExchange(d.socket, [`PUT /1.0 HTTP/1.1\r\n${H}Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`, body, next]);
  t.is(declared.error, undefined, 'no broken pipe while sending');
  isEnvelope(t, declared, 400, 'declared length over the limit');
  t.regex(declared.json.error, /too large/);
  t.regex(declared.text, /\}HTTP\/1\.1 200 OK/, 'the next request on the connection was answered');

  const chunks: (string | Buffer)[] = [`PUT /1.0 HTTP/1.1\r\n${H}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`];
  for (let at = 0; at < body.length; at += 1024 * 1024) {
    const piece = body.subarray(at, at + 1024 * 1024);
    chunks.push(`${piece.length.toString(16)}\r\n`, piece, '\r\n');
  }
  chunks.push('0\r\n\r\n', next);
  const chunked = await rawExchange(d.socket, chunks);
  t.is(chunked.error, undefined, 'no reset while sending');
  isEnvelope(t, chunked, 400, 'chunked body over the limit');
  t.regex(chunked.text, /\}HTTP\/1\.1 200 OK/, 'the next request on the connection was answered');
  t.is((await d.request('GET', '/1.0')).json.metadata.config['user.big'], undefined, 'nothing was stored');
});

test('a GET with a body, and a refused request with an unread body, keep the connection', async (t) => {
  const res = await rawExchange(d.socket, [
    `GET /1.0 HTTP/1.1\r\n${H}Content-Length: 4\r\n\r\nnull`,
    `DELETE /1.0/nowhere HTTP/1.1\r\n${H}Content-Length: 2\r\n\r\n{}`,
    `GET /1.0 HTTP/1.1\r\n${H}\r\n`,
  ]);
  const statuses = [...res.text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
  t.deepEqual(statuses, [200, 404, 200]);
  t.notRegex(res.text, /connection: close/i);
});

test('an upgrade to another protocol is ignored, as curl --http2 asks for one on every request', async (t) => {
  const plain = await rawExchange(d.socket, [upgradeRequest('/1.0', { Upgrade: 'h2c', 'HTTP2-Settings': 'AAMAAABkAAQAoAAAAAIAAAAA' })]);
  t.is(plain.status, 200, plain.text.slice(0, 300));
  t.is(plain.json?.type, 'sync');
  // A body cannot follow such a request (node stops reading at the headers): refused, never taken as empty.
  const body = '{"config":{"user.upgraded":"1"}}';
  const withBody = await rawExchange(d.socket, [`PUT /1.0 HTTP/1.1\r\n${H}Connection: Upgrade\r\nUpgrade: h2c\r\nContent-Length: ${body.length}\r\n\r\n${body}`]);
  isEnvelope(t, withBody, 400, 'upgrade with a body');
  t.deepEqual((await d.request('GET', '/1.0')).json.metadata.config, {}, 'the configuration was not replaced');
});
