/**
 * A layered container (decision 0075) migrates between two corral daemons over HTTPS on loopback
 * with the real `lxc`: the source sends its merged tree, the target gets a whole plain volume
 * with a snapshot, and the source's layer goes with the move.
 */
import test from 'ava';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { killContainers, startWithPool, type Daemon } from '../helpers/daemon.js';
import { RemoteClient } from '../helpers/remotes.js';
import { startWithImage, stopImageDaemons } from '../helpers/image-daemon.js';
import { overlayMounts } from '../helpers/needs.js';
import { lxcOk, lxcWithInput } from '../helpers/clients.js';

const PASSWORD = 'x2-layered-migration';
const client = new RemoteClient(PASSWORD);
const { ok } = client;
let source: Daemon;
let target: Daemon;

const overlaySupported = overlayMounts();
const serial = overlaySupported ? test.serial : test.serial.skip;

const poolDir = (daemon: Daemon) => {
  const pools = path.join(daemon.dir, 'storage-pools');
  return path.join(pools, readdirSync(pools)[0]!);
};

test.before(async () => {
  if (!overlaySupported) return;
  source = await startWithImage({ plugins: 'full' });
  target = await startWithPool({ plugins: 'full' });
  await client.add('x2r1', source, '127.0.28.1');
  await client.add('x2r2', target, '127.0.28.2');
});

test.after.always(async () => {
  if (target) killContainers(target.dir);
  await stopImageDaemons();
  client.remove();
});

serial('lxc move of a layered container to another daemon carries its whole merged tree and a snapshot, and drops the source layer', async (t) => {
  await lxcOk(t, source.socket, 'init', 'bb', 'x2mig', '-c', 'security.privileged=true');
  const layer = path.join(poolDir(source), 'containers-layers', 'x2mig');
  t.true(existsSync(path.join(layer, 'base')), 'layered on the source');
  const pushed = await lxcWithInput(source.socket, 'one', 'file', 'push', '-', 'x2mig/marker');
  t.is(pushed.status, 0, pushed.stderr);
  await lxcOk(t, source.socket, 'snapshot', 'x2mig', 's1');
  const again = await lxcWithInput(source.socket, 'two', 'file', 'push', '-', 'x2mig/marker');
  t.is(again.status, 0, again.stderr);

  await ok(t, 'move', 'x2r1:x2mig', 'x2r2:x2mig');
  const moved = path.join(poolDir(target), 'containers', 'x2mig');
  t.is(readFileSync(path.join(moved, 'rootfs', 'marker'), 'utf8'), 'two');
  t.true(statSync(path.join(moved, 'rootfs', 'bin', 'busybox')).isFile(), 'the image files came along: a whole tree');
  t.is(statSync(path.join(moved, 'rootfs')).dev, statSync(moved).dev, 'a plain volume on the target');
  t.is(readFileSync(path.join(poolDir(target), 'containers-snapshots', 'x2mig', 's1', 'rootfs', 'marker'), 'utf8'), 'one');
  t.false(existsSync(layer), 'the source layer went with the move');
  t.false(existsSync(path.join(poolDir(source), 'containers', 'x2mig')));

  await ok(t, 'start', 'x2r2:x2mig');
  t.is(await ok(t, 'exec', 'x2r2:x2mig', '--', 'cat', '/marker'), 'two');
  await ok(t, 'delete', '--force', 'x2r2:x2mig');
});
