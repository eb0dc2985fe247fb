/** pylxd (Debian python3-pylxd under /usr/bin/python3) against corral's unix socket. */
import test from 'ava';
import path from 'node:path';
import { projectRoot, startDaemon, stopDaemons, startWithPool } from '../helpers/daemon.js';

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

test('pylxd: upload an image, create, start, execute, put/get files, stop and delete a container', async (t) => {
  const { buildBusyboxImage } = await import('../helpers/busybox-image.js');
  const image = buildBusyboxImage('gzip');
  const d = await startWithPool();
  try {
    const run = await python(path.join(projectRoot, 'test', 'e2e', 'pylxd_containers.py'), [d.socket, image.unified]);
    t.is(run.status, 0, `${run.stderr}\n${d.output().slice(-4000)}`);
    const seen = JSON.parse(run.stdout);
    t.regex(seen.fingerprint, /^[0-9a-f]{64}$/);
    t.is(seen.status_after_start, 'Running');
    t.is(seen.exit_code, 4);
    t.is(seen.stdout.trim(), 'out');
    t.is(seen.stderr.trim(), 'err');
    t.is(seen.file, 'written by pylxd');
    t.is(seen.cat, 'written by pylxd');
    t.is(seen.status_after_stop, 'Stopped');
    t.false(seen.exists_after_delete);
  } finally {
    await d.stop();
    const { rmSync } = await import('node:fs');
    rmSync(image.dir, { recursive: true, force: true });
  }
});

test('pylxd: execute with stdin_payload hands the payload and its end to the command', async (t) => {
  const { startWithImage, stopImageDaemons } = await import('../helpers/image-daemon.js');
  const d = await startWithImage();
  try {
    const run = await python(path.join(projectRoot, 'test', 'e2e', 'pylxd_exec_stdin.py'), [d.socket, 'bb']);
    t.is(run.status, 0, run.stderr);
    const seen = JSON.parse(run.stdout);
    t.deepEqual(seen.bytes, [0, 'x', '']);
    t.deepEqual(seen.text, [3, 'hello\nworld\n', 'err\n']);
    t.is(seen.large[0], 0);
    t.is(seen.large[1], seen.large[2], 'every byte arrived');
  } finally {
    await stopImageDaemons();
  }
});
