/**
 * A snapshot copied to another server over HTTPS on loopback, with the real `lxc`: the source daemon
 * opens a migration source for the snapshot alone (`POST /1.0/instances/<name>/snapshots/<snapshot>`
 * with `migration`), in each of lxc's modes (pull, push, relay). The copy has the snapshot's files and
 * config and no snapshots; the source is left as it was.
 */
import test from 'ava';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { killContainers, startWithPool, waitFor, type Daemon } from '../helpers/daemon.js';
import { RemoteClient } from '../helpers/remotes.js';
import { startWithImage, stopImageDaemons } from '../helpers/image-daemon.js';
import { lxcOk, lxcWithInput } from '../helpers/clients.js';

const PASSWORD = 'snap-migr-13';
const client = new RemoteClient(PASSWORD);
const { lxc: remoteLxc, ok } = client;
let source: Daemon;
let target: Daemon;

function containerDir(daemon: Daemon, name: string): string {
  const pools = path.join(daemon.dir, 'storage-pools');
  return path.join(pools, readdirSync(pools)[0]!, 'containers', name);
}

const marker = (daemon: Daemon, name: string) => readFileSync(path.join(containerDir(daemon, name), 'rootfs', 'marker'), 'utf8');

test.before(async () => {
  source = await startWithImage({ plugins: 'full' });
  target = await startWithPool({ plugins: 'full' });
  await client.add('r1', source, '127.19.13.1');
  await client.add('r2', target, '127.19.13.2');
  const quiet = { is: () => {} };
  await lxcOk(quiet, source.socket, 'init', 'bb', 'c1');
  for (const [content, snapshot] of [['one', 's1'], ['two', undefined]] as const) {
    const res = await lxcWithInput(source.socket, content, 'file', 'push', '-', 'c1/marker');
    if (res.status !== 0) throw new Error(`file push: ${res.stderr}`);
    await lxcOk(quiet, source.socket, 'config', 'set', 'c1', 'user.mark', snapshot ?? 'now');
    if (snapshot) await lxcOk(quiet, source.socket, 'snapshot', 'c1', snapshot);
  }
});

test.after.always(async () => {
  // Stopped, the target unmounts its btrfs pool.
  if (target) {
    killContainers(target.dir);
    await target.stop();
  }
  await stopImageDaemons();
  client.remove();
});

for (const mode of ['pull', 'push', 'relay']) {
  test.serial(`lxc copy r1:c1/s1 r2:… --mode ${mode} makes an instance of the snapshot alone`, async (t) => {
    const name = `from-${mode}`;
    await ok(t, 'copy', 'r1:c1/s1', `r2:${name}`, '--mode', mode);
    t.is(marker(target, name), 'one', 'the snapshot\'s files, not the instance\'s');
    const shown = await remoteLxc('query', `r2:/1.0/instances/${name}?recursion=1`);
    t.is(shown.status, 0, shown.stderr);
    const made = JSON.parse(shown.stdout);
    t.is(made.config['user.mark'], 's1');
    t.is(made.status, 'Stopped');
    t.deepEqual(made.snapshots ?? [], []);
    await ok(t, 'start', `r2:${name}`);
    t.is(await ok(t, 'exec', `r2:${name}`, '--', 'cat', '/marker'), 'one');
    await ok(t, 'delete', '--force', `r2:${name}`);
    // The source is as it was, with no operation left.
    t.is(marker(source, 'c1'), 'two');
    t.deepEqual(JSON.parse(await ok(t, 'query', 'r1:/1.0/instances/c1/snapshots')), ['/1.0/instances/c1/snapshots/s1']);
    // (The source's operation ends once it has read the target's verdict, just after the copy's.)
    const running = async () => ((await source.request('GET', '/1.0/operations?recursion=1')).json?.metadata?.running ?? []).length;
    await waitFor(async () => (await running()) === 0, 10_000, 'the source\'s operation to end');
    t.pass();
  });
}

test.serial('a snapshot on a btrfs pool copies to a btrfs pool (by rsync: a btrfs stream would carry the instance)', async (t) => {
  for (const r of ['r1', 'r2']) await ok(t, 'storage', 'create', `${r}:bt`, 'btrfs', 'size=1GiB');
  await ok(t, 'init', 'r1:bb', 'r1:b1', '-s', 'bt');
  const pushMarker = async (content: string) => {
    const res = await lxcWithInput(source.socket, content, 'file', 'push', '-', 'b1/marker');
    t.is(res.status, 0, res.stderr);
  };
  await pushMarker('bt-one');
  await ok(t, 'snapshot', 'r1:b1', 'bs');
  await pushMarker('bt-two');
  await ok(t, 'copy', 'r1:b1/bs', 'r2:b2', '-s', 'bt');
  const dir = path.join(target.dir, 'storage-pools', 'bt', 'containers', 'b2');
  t.is(readFileSync(path.join(dir, 'rootfs', 'marker'), 'utf8'), 'bt-one');
  t.deepEqual(JSON.parse(await ok(t, 'query', 'r2:/1.0/instances/b2/snapshots')), []);
  await ok(t, 'delete', 'r2:b2');
  await ok(t, 'delete', 'r1:b1');
});

test.serial('an unknown snapshot is refused by the source (404) and nothing is made', async (t) => {
  const res = await remoteLxc('copy', 'r1:c1/nope', 'r2:none');
  t.not(res.status, 0);
  t.regex(res.stderr, /not found/i);
  t.deepEqual(JSON.parse(await ok(t, 'query', 'r2:/1.0/instances')), []);
  const direct = await source.request('POST', '/1.0/instances/c1/snapshots/nope', { migration: true, name: 'copied' });
  t.is(direct.status, 404);
});
