/**
 * The API description says what kind of answer each method gives (sync, operation, raw), which
 * listings take `recursion` and `filter`, and which error statuses each method answers; the pipeline
 * logs a warning when a handler answers a kind or a status its descriptor does not declare. A
 * session of the real `lxc` client over a container's life — launch, list, exec, files, console
 * log, snapshots, restore, copy, move, export, volumes, images, and the usual mistakes (names in
 * use, missing objects, deleting a running container) — must leave no such warning: what the
 * document says of these routes is what they do.
 */
import test, { type ExecutionContext } from 'ava';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Daemon } from '../helpers/daemon.js';
import { startWithImage, stopImageDaemons } from '../helpers/image-daemon.js';
import { lxc, lxcOk } from '../helpers/clients.js';

const MISDECLARED = 'its descriptor does not declare';

const scratch = mkdtempSync(path.join(tmpdir(), 'corral-api-answers-'));

test.after.always(async () => {
  await stopImageDaemons();
  rmSync(scratch, { recursive: true, force: true });
});

for (const set of ['full', 'edge']) {
  test(`an lxc session over a container's life answers only what the ${set} build's API description declares`, (t) => session(t, set));
}

async function session(t: ExecutionContext, set: string): Promise<void> {
  const d: Daemon = await startWithImage({ plugins: set });
  const scratchOf = mkdtempSync(path.join(scratch, `${set}-`));
  const run = (...args: string[]) => lxcOk(t, d.socket, ...args);
  const local = path.join(scratchOf, 'hello.txt');
  writeFileSync(local, 'hello\n');

  await run('launch', 'bb', 'c1');
  await run('list');
  await run('list', 'status=running', '--format', 'csv');
  await run('info', 'c1');
  await run('exec', 'c1', '--', 'true');
  await run('file', 'push', local, 'c1/root/hello.txt');
  t.is(await run('file', 'pull', 'c1/root/hello.txt', '-'), 'hello\n');
  await run('exec', 'c1', '--', 'ls', '/root');
  await run('console', 'c1', '--show-log');
  await run('config', 'set', 'c1', 'user.note=kept');
  await run('config', 'show', 'c1');
  await run('snapshot', 'c1', 's1');
  await run('info', 'c1');
  await run('restore', 'c1', 's1');
  await run('copy', 'c1', 'c2');
  await run('move', 'c2', 'c3');
  await run('export', 'c1', path.join(scratchOf, 'c1.tar.gz'));
  await run('query', '/1.0/instances/c1/logs');
  await run('storage', 'volume', 'create', 'default', 'v1');
  await run('storage', 'volume', 'snapshot', 'default', 'v1', 'vs1');
  await run('storage', 'volume', 'list', 'default');
  await run('image', 'list');
  await run('image', 'export', 'bb', path.join(scratchOf, 'exported'));
  await run('profile', 'list');
  await run('network', 'list');
  if (set === 'full') await run('project', 'list');
  await run('operation', 'list');
  await run('warning', 'list');
  // The usual mistakes: each refusal must be a status the description lists for its method.
  const refused = async (...args: string[]) => t.not((await lxc(d.socket, ...args)).status, 0, `lxc ${args.join(' ')} is refused`);
  await refused('launch', 'bb', 'c1');
  await refused('info', 'missing');
  await refused('delete', 'c1');
  await refused('snapshot', 'c1', 's1');
  await refused('move', 'c1', 'c3');
  await refused('storage', 'volume', 'create', 'default', 'v1');
  await refused('profile', 'create', 'default');
  await refused('network', 'show', 'missing');
  await refused('config', 'set', 'c1', 'no.such.key=1');
  await refused('image', 'delete', 'missing');
  await refused('file', 'pull', 'c1/no/such/file', '-');
  await refused('query', '-X', 'POST', '/1.0/instances', '--data', '{"name": "c9", "source": {"type": "image", "alias": "nosuch"}}');
  await refused('query', '-X', 'POST', '/1.0/images', '--data', '{"source": {"type": "instance", "name": "nosuch"}}');
  if (set === 'full') {
    await refused('project', 'create', 'default');
    await refused('list', '--project', 'missing');
  }

  await run('stop', 'c1', '--force');
  await run('delete', 'c1', 'c3');
  await run('storage', 'volume', 'delete', 'default', 'v1');

  const log = readFileSync(path.join(d.dir, 'corral.log'), 'utf8');
  const misdeclared = log.split('\n').filter((line) => line.includes(MISDECLARED));
  t.deepEqual(misdeclared, [], 'no handler answered a kind its descriptor does not declare');
}
