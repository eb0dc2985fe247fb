/**
 * A client that waits on an operation and hangs up must not leave its request behind: a token
 * operation lives until it is used, and each abandoned `/wait` on it used to keep ~8 KiB (the
 * request and its handler) for as long as the token lived. Measured as the daemon's V8 heap after
 * a full collection, through the inspector on loopback.
 */
import test from 'ava';
import http from 'node:http';
import { startDaemon, stopDaemons, waitFor } from '../helpers/daemon.js';
import { Inspector } from '../helpers/inspector.js';

test.after.always(stopDaemons);

const WAITS = 400;

async function liveHeapMiB(inspector: Inspector): Promise<number> {
  await inspector.collectGarbage();
  return inspector.heapUsedMiB();
}

test('waits on a long-lived operation whose clients hung up are let go', async (t) => {
  const d = await startDaemon({ plugins: 'full', nodeArgs: ['--inspect=127.0.0.1:0'] });
  const inspector = await Inspector.connect(d.output);
  try {
    const token = await d.request('POST', '/1.0/certificates', { name: 'waited-on', type: 'client', token: true });
    t.is(token.status, 202);
    const op = token.json.operation as string;
    const baseline = await liveHeapMiB(inspector);

    const pending = Array.from({ length: WAITS }, () => {
      const req = http.request({ socketPath: d.socket, method: 'GET', path: `${op}/wait`, agent: false });
      req.on('error', () => undefined);
      req.end();
      return req;
    });
    // The waits have reached the daemon once the heap holds them (about 8 KiB each).
    let held = 0;
    await waitFor(async () => (held = (await liveHeapMiB(inspector)) - baseline) > (WAITS * 5) / 1024, 30000, 'the waits to reach the daemon');
    for (const req of pending) req.destroy();

    // Without the fix the heap stays `held` above the baseline until the token is used.
    let left = held;
    await waitFor(async () => (left = (await liveHeapMiB(inspector)) - baseline) < held / 3, 30000, 'the abandoned waits to be let go')
      .catch(() => undefined);
    t.true(left < held / 3, `${left.toFixed(2)} MiB of ${held.toFixed(2)} MiB still held after the clients hung up`);

    // The operation itself is unaffected: still running, and a wait with a timeout still answers.
    const view = await d.request('GET', `${op}/wait?timeout=0`);
    t.is(view.json.metadata.status, 'Running');
  } finally {
    inspector.close();
    await d.stop();
  }
});
