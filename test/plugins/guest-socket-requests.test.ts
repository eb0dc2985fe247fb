/**
 * Requests a guest may send to /dev/lxd/sock beyond plain GETs, on real containers of a real
 * daemon (full set), asked from inside by the static client (test/fixtures/devlxd-client): any
 * method, with or without a body, gets the GET answer; targets that are not URLs (`//`) or hold
 * malformed escapes get an answer and leave the daemon running; heads split across writes, bodies
 * arriving late or chunked, malformed heads, several requests on one connection and silent guests
 * (on the same socket from the host); and `PATCH /1.0 {"state": "Ready"}` answered as a GET and
 * changing nothing, as the reference 5.0.2 does (checked against it from inside its container).
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import net from 'node:net';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { startWithPool, stopDaemons, unixWebsocket, waitFor, type Daemon } from '../helpers/daemon.js';
import { buildBusyboxImage, type BusyboxImage } from '../helpers/busybox-image.js';
import { importImage } from '../helpers/api.js';
import { hasLxc, lxc, lxcEnv } from '../helpers/clients.js';
import { serialUnless } from '../helpers/needs.js';
import { askInside, buildDevlxdClient, devlxdClientUnavailable, launchWithClient, removeDevlxdClient } from '../helpers/devlxd-client.js';
import { referenceUnavailable, startReference, type ReferenceDaemon } from '../helpers/reference-daemon.js';

const missing = devlxdClientUnavailable() ?? (hasLxc() ? undefined : 'the lxc client is not installed');
const serial = serialUnless(missing);
const withReference = serialUnless(missing ?? referenceUnavailable());

let d: Daemon;
let image: BusyboxImage;
let client: string;

const launch = (socket: string, name: string, config: Record<string, string> = {}) => launchWithClient(socket, client, name, config);

const ask = askInside;

/** Raw bytes to the guest socket from the host, written in `parts` with a pause between; all that comes back until the close. */
function raw(sock: string, parts: string[], pauseMs = 50, boundMs = 20000): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = net.connect(sock);
    let out = '';
    const timer = setTimeout(() => {
      c.destroy();
      reject(new Error(`no close after ${boundMs} ms; got ${JSON.stringify(out)}`));
    }, boundMs);
    c.on('data', (b) => (out += b.toString('latin1')));
    c.on('error', () => {});
    c.on('close', () => {
      clearTimeout(timer);
      resolve(out);
    });
    c.on('connect', async () => {
      for (const [i, part] of parts.entries()) {
        if (i) await new Promise((r) => setTimeout(r, pauseMs));
        if (!c.destroyed) c.write(part);
      }
    });
  });
}

const statusOf = (response: string) => Number(/^HTTP\/1\.1 (\d+)/.exec(response)?.[1] ?? -1);
const bodyOf = (response: string) => response.slice(response.indexOf('\r\n\r\n') + 4);

test.before(async () => {
  if (missing) return;
  client = buildDevlxdClient();
  image = buildBusyboxImage('gzip');
  d = await startWithPool({ plugins: 'full' });
  await importImage(d, image.unified, 'bb');
  await launch(d.socket, 'w7fd1', { 'user.k': 'value', 'user.meta-data': 'mykey: myvalue' });
});

test.afterEach.always((t) => {
  if (!t.passed && d) t.log(d.output().slice(-3000));
});

test.after.always(async () => {
  if (d) await lxc(d.socket, 'delete', '--force', 'w7fd1');
  await stopDaemons();
  if (image) rmSync(image.dir, { recursive: true, force: true });
  removeDevlxdClient();
});

serial('any method, with a body or without, gets the GET answer of each path, asked from inside', async (t) => {
  for (const p of ['/', '/1.0', '/1.0/config', '/1.0/config/user.k', '/1.0/config/user.absent', '/1.0/config/limits.cpu', '/1.0/meta-data', '/1.0/devices', '/1.0/nothing', '/1.0/', '/1.0/events']) {
    const small = await ask(d.socket, 'w7fd1', p);
    // The reference answers any method as GET, whatever the body.
    const full = await ask(d.socket, 'w7fd1', p, 'POST', '{"x": 1}');
    t.log(p, JSON.stringify(small), JSON.stringify(full));
    t.true(small.status >= 200, `GET ${p}: ${small.body}`);
    t.deepEqual(small, full, p);
  }
  t.is((await ask(d.socket, 'w7fd1', '/1.0/config/user.k')).body, 'value');
  // The events websocket beside them: a guest listening hears its own change.
  const child = spawn('lxc', ['exec', 'w7fd1', '--', '/devlxd-client', 'events', 'type=config', '20'], { env: lxcEnv(d.socket), stdio: ['ignore', 'pipe', 'ignore'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c));
  try {
    await waitFor(() => out.startsWith('ready\n') || child.exitCode !== null, 20000, 'the events client to connect');
    t.true(out.startsWith('ready\n'), out);
    t.is((await lxc(d.socket, 'config', 'set', 'w7fd1', 'user.heard', 'yes')).status, 0);
    await waitFor(() => out.includes('user.heard'), 10000, 'the guest to hear its change');
  } finally {
    child.kill('SIGKILL');
  }
});

serial('targets that are not URLs or hold bad escapes get an answer, and the daemon lives on', async (t) => {
  t.is((await ask(d.socket, 'w7fd1', '//')).status, 400);
  t.is((await ask(d.socket, 'w7fd1', '/\\')).status, 400);
  t.is((await ask(d.socket, 'w7fd1', '/1.0/config/user.%ZZ')).status, 404);
  t.is((await ask(d.socket, 'w7fd1', '/1.0/config/%ZZ')).status, 403);
  t.is((await ask(d.socket, 'w7fd1', '/1.0/images/%ZZ/export')).status, 403);
  // An upgrade to a target that is not a URL.
  const sock = path.join(d.dir, 'devlxd', 'default_w7fd1', 'sock');
  const upgrade = await raw(sock, ['GET // HTTP/1.1\r\nHost: devlxd\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n']);
  t.is(statusOf(upgrade), 404, upgrade);
  t.is(d.child.exitCode, null, 'the daemon is still running');
  t.is((await ask(d.socket, 'w7fd1', '/1.0/config/user.k')).body, 'value');
  t.is((await d.request('GET', '/1.0')).status, 200);
});

serial('split heads, late and chunked bodies, bad heads, two requests in one write and silent guests', async (t) => {
  t.timeout(90_000);
  const sock = path.join(d.dir, 'devlxd', 'default_w7fd1', 'sock');
  // A guest listening for events, silent for longer than that timeout, is not dropped with the silent ones.
  const listener = spawn('lxc', ['exec', 'w7fd1', '--', '/devlxd-client', 'events', 'type=config', '80'], { env: lxcEnv(d.socket), stdio: ['ignore', 'pipe', 'ignore'] });
  let heard = '';
  listener.stdout.on('data', (c: Buffer) => (heard += c));
  t.teardown(() => listener.kill('SIGKILL'));
  await waitFor(() => heard.startsWith('ready\n') || listener.exitCode !== null, 20000, 'the events client to connect');
  t.true(heard.startsWith('ready\n'), heard);
  // A head in three writes.
  const split = await raw(sock, ['GET /1.0/config/us', 'er.k HTTP/1.1\r\nHost: devlxd\r\n', '\r\n']);
  t.is(statusOf(split), 200, split);
  t.is(bodyOf(split), 'value');
  // A head announcing a body that comes later: read, then answered as GET.
  const late = await raw(sock, ['PATCH /1.0 HTTP/1.1\r\nHost: devlxd\r\nContent-Type: application/json\r\nContent-Length: 17\r\nConnection: close\r\n\r\n', '{"state":"Ready"}']);
  t.is(statusOf(late), 200, late);
  t.deepEqual(JSON.parse(bodyOf(late)), { api_version: '1.0', location: 'none', instance_type: 'container', state: '' });
  // A chunked body too.
  const chunked = await raw(sock, ['POST /1.0/config HTTP/1.1\r\nHost: devlxd\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n', '2\r\n{}\r\n0\r\n\r\n']);
  t.is(statusOf(chunked), 200, chunked);
  t.true(bodyOf(chunked).includes('/1.0/config/user.k'), chunked);
  // Not HTTP: a 400, and the connection closes.
  t.is(statusOf(await raw(sock, ['NONSENSE\r\n\r\n'])), 400);
  t.is(statusOf(await raw(sock, ['GET /1.0 HTTP/1.1\r\nno colon here\r\n\r\n'])), 400);
  // Two requests in one write, the second closing: both answered, in order.
  const two = await raw(sock, ['GET /1.0/config/user.k HTTP/1.1\r\nHost: devlxd\r\n\r\nGET / HTTP/1.1\r\nHost: devlxd\r\nConnection: close\r\n\r\n']);
  t.is(statusOf(two), 200, two);
  t.true(two.indexOf('value') > 0 && two.indexOf('["/1.0"]') > two.indexOf('value'), two);
  // A guest that connects and says nothing is dropped, not held forever.
  const started = Date.now();
  // Closed without a word by the sweep, or with a 408 by the server's own head timeout (the same 10 s;
  // whichever check comes round first).
  const silent = await raw(sock, [], 0, 30000);
  t.true(silent === '' || statusOf(silent) === 408, silent);
  // 10 s, checked every 5 s.
  const waited = Date.now() - started;
  t.true(waited >= 9000 && waited < 20000, `dropped after ${waited} ms`);
  t.is((await lxc(d.socket, 'config', 'set', 'w7fd1', 'user.late', 'still-heard')).status, 0);
  await waitFor(() => heard.includes('still-heard'), 10000, 'the long-silent listener to hear a change');
  // And the socket still answers.
  t.is(statusOf(await raw(sock, ['GET /1.0 HTTP/1.1\r\nHost: devlxd\r\n\r\n'])), 200);
});

/** Lifecycle actions seen while `work` runs, apart from the execs that carry the client's requests. */
async function lifecycleDuring(socket: string, work: () => Promise<void>): Promise<string[]> {
  const ws = await unixWebsocket(socket, '/1.0/events?type=lifecycle');
  const seen: string[] = [];
  ws.on('message', (m) => seen.push(JSON.parse(String(m)).metadata.action));
  try {
    await work();
    // A marker change: once its event is in, every earlier one is too.
    await waitFor(() => seen.includes('instance-exec'), 10000, 'the exec events');
    await new Promise((r) => setTimeout(r, 500));
  } finally {
    ws.close();
  }
  return seen.filter((a) => a !== 'instance-exec');
}

const readyBodies = ['{"state":"Ready"}', '{"state":"Started"}', '{"state":"Bogus"}', 'not json'];

serial('PATCH /1.0 with a state is answered as a GET and changes nothing, as 5.0.2 does', async (t) => {
  const get = await ask(d.socket, 'w7fd1', '/1.0');
  t.is(get.status, 200);
  const others = await lifecycleDuring(d.socket, async () => {
    for (const body of readyBodies) {
      const patched = await ask(d.socket, 'w7fd1', '/1.0', 'PATCH', body);
      t.deepEqual(patched, get, body);
    }
  });
  t.deepEqual(others, [], 'no lifecycle event besides the execs');
  const after = await ask(d.socket, 'w7fd1', '/1.0');
  t.is(JSON.parse(after.body).state, '');
  const state = (await d.request('GET', '/1.0/instances/w7fd1/state')).json.metadata;
  t.is(state.status, 'Running');
  const config = (await d.request('GET', '/1.0/instances/w7fd1')).json.metadata.config;
  t.false('volatile.last_state.ready' in config);
});

withReference('PATCH /1.0 with a state gets the same answers and host-side effects from inside a reference container', async (t) => {
  let ref: ReferenceDaemon | undefined;
  try {
    ref = await startReference();
    const up = await ref.call('POST', '/1.0/images', readFileSync(image.unified), { 'Content-Type': 'application/octet-stream' });
    t.is(up.op?.status, 'Success', up.op?.err);
    await ref.request('POST', '/1.0/images/aliases', { name: 'bb', target: up.op.metadata.fingerprint });
    await launch(ref.socket, 'w7fdref', {});
    for (const [socket, name] of [[ref.socket, 'w7fdref'], [d.socket, 'w7fd1']] as const) {
      const others = await lifecycleDuring(socket, async () => {
        for (const body of readyBodies) {
          const answer = await ask(socket, name, '/1.0', 'PATCH', body);
          t.is(answer.status, 200, `${name} ${body}`);
          t.deepEqual(JSON.parse(answer.body), { api_version: '1.0', location: 'none', instance_type: 'container', state: '' }, `${name} ${body}`);
        }
      });
      t.deepEqual(others, [], `${name}: no lifecycle event besides the execs`);
      const state = (await (socket === ref.socket ? ref.request('GET', `/1.0/instances/${name}/state`) : d.request('GET', `/1.0/instances/${name}/state`))).json.metadata;
      t.is(state.status, 'Running', name);
      const config = (await (socket === ref.socket ? ref.request('GET', `/1.0/instances/${name}`) : d.request('GET', `/1.0/instances/${name}`))).json.metadata.config;
      t.false('volatile.last_state.ready' in config, name);
    }
  } finally {
    await ref?.stop();
  }
});
