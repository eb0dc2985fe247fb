/**
 * Keep-alive connections as Python's http.client (and so Ansible's lxd modules) uses them: one
 * connection for every request, a `null` body on each GET, idle gaps between requests. The server
 * must neither close an idle connection under a client about to reuse it, nor close one because a
 * GET carried a body, on the unix socket and on TLS alike.
 */
import test from 'ava';
import path from 'node:path';
import { projectRoot, startDaemon, stopDaemons } from '../helpers/daemon.js';
import { freePort } from '../helpers/tls-client.js';
import { python } from '../helpers/clients.js';

test.after.always(stopDaemons);

// Longer than node's default keep-alive timeout (5 s, enforced at 6 s).
const IDLE_SECONDS = 7;

test('one keep-alive connection serves GETs with bodies and survives idle gaps, on the socket and on TLS', async (t) => {
  const d = await startDaemon({ plugins: 'edge' });
  const port = await freePort();
  t.is((await d.request('PATCH', '/1.0', { config: { 'core.https_address': `127.0.0.1:${port}` } })).status, 200);
  const run = await python(path.join(projectRoot, 'test', 'kernel', 'keepalive_client.py'), [d.socket, '127.0.0.1', String(port), String(IDLE_SECONDS)]);
  t.is(run.status, 0, run.stderr);
  const results = JSON.parse(run.stdout) as Record<string, { statuses: number[]; failures: string[]; sockets: number }>;
  // The wait is for an operation that does not exist (unix), or not allowed to an untrusted client (TLS).
  for (const [transport, wait] of [['unix', 404], ['tls', 403]] as const) {
    const r = results[transport]!;
    t.deepEqual(r.failures, [], `${transport}: no request failed`);
    t.deepEqual(r.statuses, [200, 200, wait, 200, 200, 200], transport);
    t.is(r.sockets, 1, `${transport}: every request went over the one connection`);
  }
  await d.stop();
});
