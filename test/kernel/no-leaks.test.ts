/**
 * No failing request gets library text back: the answers of a broad set of refused requests (bad
 * config values, listener conflicts, bad bodies, paths, methods, upgrades, framing) carry no key or
 * certificate material, no terminal escapes, no dumps of start options and no stack traces.
 */
import test from 'ava';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { startDaemon, stopDaemons } from '../helpers/daemon.js';
import { freePort, tlsRequest } from '../helpers/tls-client.js';
import { rawExchange, upgradeRequest } from '../helpers/raw-http.js';

test.after.always(stopDaemons);

/** The base64 lines of a PEM file: any one of them in an answer is a leak. */
function pemLines(pem: string): string[] {
  return pem.split('\n').filter((line) => line.length >= 32 && !line.startsWith('-----'));
}

test('refused requests never carry key material, escapes, option dumps or stack traces', async (t) => {
  const d = await startDaemon({ plugins: 'edge' });
  const secrets = [...pemLines(readFileSync(path.join(d.dir, 'server.key'), 'utf8')), ...pemLines(readFileSync(path.join(d.dir, 'server.crt'), 'utf8'))];
  t.true(secrets.length > 2);
  const answers: { what: string; status: number; body: string }[] = [];
  // A request that gets no answer at all (a reset, a broken pipe) is recorded as status 0, and fails below.
  const keep = async (what: string, pending: Promise<{ status: number; body?: string; text?: string }>) => {
    const res: { status: number; body?: string; text?: string } = await pending.catch((err: Error) => ({ status: 0, body: `no answer: ${err.message}` }));
    answers.push({ what, status: res.status, body: res.body ?? res.text ?? '' });
  };

  // On every address (dual-stack), so any host with this port conflicts.
  const blocker = net.createServer().listen(0);
  await new Promise((r) => blocker.once('listening', r));
  const taken = (blocker.address() as net.AddressInfo).port;
  const port = await freePort();
  const setAddress = (value: string) => d.request('PATCH', '/1.0', { config: { 'core.https_address': value } });

  // Addresses no listener can take, before any listener runs and while one does.
  const addresses = ['not a host:8443', '999.1.1.1:8443', '127.0.0.1:99999', '[::1', '[zz]:8443', 'a..b:8443', '-bad-:8443', ':0',
    `127.0.0.1:${taken}`, `10.255.254.253:${port}`, 'x'.repeat(10_000), '\u001b[31mred:1'];
  for (const value of addresses) await keep(`https_address ${value.slice(0, 40)}`, setAddress(value));
  await keep('https_address invalid UTF-8', d.request('PUT', '/1.0', Buffer.concat([Buffer.from('{"config":{"core.https_address":"'), Buffer.from([0xff, 0xfe, 0x3a]), Buffer.from('8443"}}')])));
  t.is((await setAddress(`127.0.0.1:${port}`)).status, 200);
  for (const value of ['not a host:8443', `127.0.0.1:${taken}`, `[::1]:${taken}`]) await keep(`moving the listener to ${value}`, setAddress(value));
  t.is((await d.request('GET', '/1.0')).json.metadata.config['core.https_address'], `127.0.0.1:${port}`, 'refused values are not stored');

  // Bodies.
  for (const [what, body, headers] of [
    ['invalid JSON', '{"config":', {}],
    ['deep nesting', '['.repeat(5000) + ']'.repeat(5000), {}],
    ['wrong types', { config: { 'core.https_address': 5 } }, {}],
    ['multipart without boundary', '{"config":', { 'content-type': 'multipart/form-data' }],
    ['garbage gzip', Buffer.from('not gzip'), { 'content-encoding': 'gzip' }],
    ['gzip', gzipSync('{"config":{}}'), { 'content-encoding': 'gzip' }],
    ['over the limit', Buffer.alloc(17 * 1024 * 1024, 0x20), {}],
  ] as [string, unknown, Record<string, string>][]) await keep(`body: ${what}`, d.request('PUT', '/1.0', body, headers));

  // Paths, methods, framing and upgrades, below hapi.
  for (const [what, bytes] of [
    ['bad escape', 'GET /1.0/instances/%zz HTTP/1.1\r\nHost: x\r\n\r\n'],
    ['asterisk', 'GET * HTTP/1.1\r\nHost: x\r\n\r\n'],
    ['absolute form', 'GET http://x/1.0/%zz HTTP/1.1\r\nHost: x\r\n\r\n'],
    ['unknown method', 'FOO /1.0 HTTP/1.1\r\nHost: x\r\n\r\n'],
    ['bad Content-Length', 'PUT /1.0 HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n'],
    ['bad chunk', 'PUT /1.0 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n'],
    ['bad content type', 'PUT /1.0 HTTP/1.1\r\nHost: x\r\nContent-Type: ;;;\r\nContent-Length: 1\r\n\r\n{'],
    ['bad upgrade', upgradeRequest('/1.0/events', { Upgrade: 'foo' })],
    ['bad upgrade key', upgradeRequest('/1.0/events', { 'Sec-WebSocket-Key': 'x' })],
    ['bad upgrade protocol', upgradeRequest('/1.0/events', { 'Sec-WebSocket-Protocol': '"' })],
  ]) await keep(what, rawExchange(d.socket, [bytes]));

  // The TLS listener, as an untrusted client.
  const target = { host: '127.0.0.1', port };
  await keep('TLS: untrusted PUT', tlsRequest(target, undefined, 'PUT', '/1.0', { config: { 'core.https_address': 'not a host:1' } }));
  await keep('TLS: bad escape', tlsRequest(target, undefined, 'GET', '/1.0/%zz'));
  blocker.close();

  for (const { what, status, body } of answers) {
    t.true(status >= 400 && status < 500, `${what}: ${status} ${body.slice(0, 200)}`);
    t.notRegex(body, /PRIVATE KEY|BEGIN CERTIFICATE|Invalid server options|\u001b|\\u001b|node_modules|\n\s+at |\\n\s+at /, what);
    for (const line of secrets) t.false(body.includes(line) || body.includes(line.slice(0, 40)), `${what}: key or certificate material`);
  }
  await d.stop();
});
