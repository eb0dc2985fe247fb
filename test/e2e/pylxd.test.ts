/** pylxd (Debian python3-pylxd under /usr/bin/python3) against corral's unix socket. */
import test from 'ava';
import path from 'node:path';
import { projectRoot, startDaemon, stopDaemons } from '../helpers/daemon.js';

test.after.always(stopDaemons);
import { python } from '../helpers/clients.js';

test('pylxd connects, reads host_info and waits for an operation', async (t) => {
  const d = await startDaemon({ plugins: 'test', args: ['--registry', path.join(projectRoot, 'test', 'fixtures', 'registry.json')] });
  try {
    const run = await python(path.join(projectRoot, 'test', 'e2e', 'pylxd_check.py'), [d.socket]);
    t.is(run.status, 0, run.stderr);
    const seen = JSON.parse(run.stdout);
    t.true(seen.trusted);
    t.is(seen.api_version, '1.0');
    t.truthy(seen.server_name);
    t.true(seen.has_etag);
    t.false(seen.has_nonsense);
    t.is(seen.operation_status, 'Success');
    t.is(seen.operation_metadata.result, 'done');
    t.deepEqual(seen.warnings, []);
  } finally {
    await d.stop();
  }
});
