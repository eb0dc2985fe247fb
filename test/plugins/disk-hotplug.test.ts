/**
 * Disk mounts added to and removed from running containers through the liblxc driver (hot-plug):
 * idmapped like those made at start, read-only, single files, detach after a restarted daemon,
 * privileged containers, and failures that leave nothing mounted.
 */
import test from 'ava';
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ApiError, type DeviceMount, type DriverInstance } from '../../sdk/index.js';
import { LxcDriver } from '../../plugins/instance-lxc/driver.js';
import { lxcName } from '../../plugins/instance-lxc/paths.js';
import { lxcDriverFixture, runIn } from '../helpers/lxc-driver.js';

const { log, tools, run: RUN, scratch, image, dataDir, driver } = lxcDriverFixture('disk-hotplug-test');
const started: DriverInstance[] = [];

async function launch(suffix: string, config: Record<string, string> = {}, mounts: DeviceMount[] = []): Promise<DriverInstance> {
  const name = `h${RUN}-${suffix}`;
  const volumePath = path.join(dataDir, 'volumes', `default_${name}`);
  mkdirSync(path.join(volumePath, 'rootfs'), { recursive: true });
  execFileSync('tar', ['-x', '--numeric-owner', '-f', image.rootfs, '-C', path.join(volumePath, 'rootfs')]);
  const inst: DriverInstance = { project: 'default', name, type: 'container', architecture: 'x86_64', config, devices: {}, volumePath, logDir: path.join(dataDir, 'logs', name) };
  started.push(inst);
  await driver.start(inst, [{ device: 'root', rootfs: { path: path.join(volumePath, 'rootfs') } }, ...(mounts.length ? [{ device: 'cold', mounts }] : [])]);
  return inst;
}

const run = (inst: DriverInstance, command: string[]) => runIn(driver, inst, command);

/** A directory standing for a custom volume: container ids on disk, as corral keeps them. */
function volumeDir(name: string): string {
  const dir = path.join(scratch, name);
  mkdirSync(dir, { mode: 0o711 });
  writeFileSync(path.join(dir, 'note'), 'from the host\n');
  return dir;
}

test.after.always(() => {
  for (const inst of started) {
    spawnSync('lxc-stop', ['-n', lxcName(inst.project, inst.name), '-P', driver.paths.lxcpath, '-k'], { stdio: 'ignore', timeout: 10000 });
  }
  rmSync(scratch, { recursive: true, force: true });
  rmSync(image.dir, { recursive: true, force: true });
});

test.serial('an idmapped mount attached to a running container: files written inside keep container ids on disk; detach removes it, the container runs on', async (t) => {
  const inst = await launch('idmap');
  const vol = volumeDir('vol');
  t.is((await run(inst, ['ls', '/mnt/v'])).code, 1, 'nothing there before');
  await driver.attachDevice(inst, { device: 'data', mounts: [{ source: vol, target: '/mnt/v', shift: true }] });
  t.is((await run(inst, ['cat', '/mnt/v/note'])).stdout, 'from the host\n');
  // Host root's file shows as the container's root, through the container's map.
  t.is((await run(inst, ['stat', '-c', '%u:%g', '/mnt/v/note'])).stdout.trim(), '0:0');
  t.is((await run(inst, ['sh', '-c', 'echo inside > /mnt/v/reply && chown 1000:1000 /mnt/v/reply'])).code, 0);
  t.is(readFileSync(path.join(vol, 'reply'), 'utf8'), 'inside\n');
  t.is(statSync(path.join(vol, 'reply')).uid, 1000, 'container ids on disk');
  t.is(statSync(path.join(vol, 'reply')).gid, 1000);
  // The mount point was made by the container's root, through its idmapped rootfs.
  t.is((await run(inst, ['stat', '-c', '%u', '/mnt/v/..'])).stdout.trim(), '0');
  t.is(statSync(path.join(inst.volumePath, 'rootfs/mnt/v')).uid, 0);

  await driver.detachDevice(inst, 'data');
  t.is((await run(inst, ['ls', '/mnt/v/note'])).code, 1, 'gone inside');
  t.true(existsSync(path.join(vol, 'note')), 'the volume itself is untouched');
  t.is(await driver.status(inst), 'Running');
  await driver.detachDevice(inst, 'data');
});

test.serial('read-only and single-file mounts hot-plugged; a mount made at start is detached by a second driver (restarted daemon)', async (t) => {
  const cold = volumeDir('cold');
  const inst = await launch('ro', {}, [{ source: cold, target: '/mnt/cold', shift: true }]);
  const vol = volumeDir('ro');
  const file = path.join(scratch, 'single.conf');
  writeFileSync(file, 'key=value\n');
  await driver.attachDevice(inst, { device: 'ro', mounts: [{ source: vol, target: '/srv/ro', shift: true, readonly: true }] });
  await driver.attachDevice(inst, { device: 'file', mounts: [{ source: file, target: '/etc/single.conf', file: true }] });
  const write = await run(inst, ['touch', '/srv/ro/nope']);
  t.not(write.code, 0);
  t.regex(write.stderr, /Read-only/i);
  t.is((await run(inst, ['cat', '/etc/single.conf'])).stdout, 'key=value\n');
  // Not shifted: host root is nobody inside, as at start.
  t.is((await run(inst, ['stat', '-c', '%u', '/etc/single.conf'])).stdout.trim(), '65534');

  const again = new LxcDriver({ hostTools: tools, log, dataDir });
  await again.detachDevice(inst, 'cold');
  await again.detachDevice(inst, 'ro');
  t.is((await run(inst, ['ls', '/mnt/cold/note'])).code, 1);
  t.is((await run(inst, ['ls', '/srv/ro/note'])).code, 1);
  t.is((await run(inst, ['cat', '/etc/single.conf'])).stdout, 'key=value\n', 'other devices stay');
});

test.serial('a privileged container gets a plain bind mount (no id map to apply)', async (t) => {
  const inst = await launch('priv', { 'security.privileged': 'true' });
  const vol = volumeDir('priv');
  chmodSync(path.join(vol, 'note'), 0o600);
  execFileSync('chown', ['1234:1234', path.join(vol, 'note')]);
  await driver.attachDevice(inst, { device: 'data', mounts: [{ source: vol, target: '/mnt/p', shift: true }] });
  t.is((await run(inst, ['stat', '-c', '%u', '/mnt/p/note'])).stdout.trim(), '1234');
  await driver.detachDevice(inst, 'data');
  t.is((await run(inst, ['ls', '/mnt/p/note'])).code, 1);
});

test.serial('a failing attach leaves nothing mounted; bad targets and a replaced root filesystem are refused', async (t) => {
  const inst = await launch('fail');
  const vol = volumeDir('fail');
  const err = await t.throwsAsync(driver.attachDevice(inst, { device: 'two', mounts: [
    { source: vol, target: '/mnt/first', shift: true },
    { source: path.join(scratch, 'does-not-exist'), target: '/mnt/second', shift: true },
  ] }));
  t.true(err instanceof ApiError);
  t.regex(err!.message, /does-not-exist/);
  t.is((await run(inst, ['ls', '/mnt/first/note'])).code, 1, 'the first mount was undone');
  // An optional mount whose source is missing is skipped.
  await driver.attachDevice(inst, { device: 'opt', mounts: [{ source: path.join(scratch, 'nope'), target: '/mnt/opt', optional: true }] });
  t.is((await run(inst, ['ls', '/mnt/opt'])).code, 1);
  const bad = await t.throwsAsync(driver.attachDevice(inst, { device: 'bad', mounts: [{ source: vol, target: '/mnt/../../x' }] }));
  t.is((bad as ApiError).status, 400);
  // The root disk: its own rootfs is a no-op (a size edit), another one is refused.
  await driver.attachDevice(inst, { device: 'root', rootfs: { path: path.join(inst.volumePath, 'rootfs') } });
  const other = await t.throwsAsync(driver.attachDevice(inst, { device: 'root', rootfs: { path: vol } }));
  t.is((other as ApiError).status, 400);
  t.is(await driver.status(inst), 'Running');
});
