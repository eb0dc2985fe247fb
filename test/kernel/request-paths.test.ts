/**
 * A path is matched as sent. `.` and `..` segments, written plainly or percent-encoded, are values
 * like any other: they never resolve a request into another route, for HTTP routes and websocket
 * upgrades alike.
 */
import test from 'ava';
import { startDaemon, stopDaemons, type Daemon } from '../helpers/daemon.js';
import { rawExchange, upgradeRequest } from '../helpers/raw-http.js';

test.after.always(stopDaemons);

let d: Daemon;
test.before(async () => {
  d = await startDaemon({ plugins: 'edge' });
});

const WAIT = '/1.0/operations/00000000-0000-0000-0000-000000000000/wait?timeout=0';

test('a dot segment in a name position is that name, which does not exist', async (t) => {
  for (const name of ['%2e%2e', '%2E%2E', '..', '.', '%2e', '.%2e']) {
    const res = await d.request('GET', `/1.0/instances/${name}`);
    t.is(res.status, 404, name);
    t.is(res.json?.error, 'Instance not found', name);
  }
});

test('dot segments elsewhere reach no route', async (t) => {
  for (const url of ['/1.0/..', '/1.0/../1.0', '/1.0/./instances', '/1.0/%2e%2e/1.0', '/1.0/instances/c1/..', `/1.0/../1.0${WAIT.slice(4)}`, `/1.0/x/%2E%2E${WAIT.slice(4)}`]) {
    const res = await d.request('GET', url);
    t.is(res.status, 404, url);
    t.is(res.json?.type, 'error', url);
    t.is(res.json?.error, 'Not found', `${url} reached a route`);
  }
  // The same request without dot segments does reach the wait route.
  t.is((await d.request('GET', WAIT)).json?.error, 'Operation not found');
});

test('websocket upgrades are matched as sent too', async (t) => {
  for (const url of ['/1.0/x/../events', '/1.0/%2e%2e/1.0/events', '/1.0/./events', '/1.0/events/.']) {
    const res = await rawExchange(d.socket, [upgradeRequest(url)]);
    t.is(res.status, 404, url);
    t.is(res.json?.error, 'Not found', url);
  }
  t.is((await rawExchange(d.socket, [upgradeRequest('/1.0/events')])).status, 101, 'the plain path upgrades');
});
