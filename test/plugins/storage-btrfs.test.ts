/**
 * btrfs pools on the other two sources, through the pools API of a test kernel: a directory on an
 * existing btrfs file system (used in place, kept at delete) and a block device (formatted,
 * refused while mounted elsewhere).
 */
import test from 'ava';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startTestKernel, type TestKernel } from '../../sdk/testing/index.js';
import { StorageServiceRef } from '../../sdk/index.js';

let k: TestKernel;
let work: string;
const devices: string[] = [];

/** A zeroed file behind a fresh loop device. */
function loopDevice(name: string, mib: number): string {
  const file = path.join(work, name);
  execFileSync('truncate', ['-s', `${mib}M`, file]);
  const device = execFileSync('losetup', ['--find', '--show', file], { encoding: 'utf8' }).trim();
  devices.push(device);
  return device;
}

test.before(async () => {
  work = mkdtempSync(path.join(tmpdir(), 'corral-btrfs-src-'));
  k = await startTestKernel({ plugins: ['storage', 'storage-btrfs'] });
});

test.after.always(async () => {
  await k?.stop();
  spawnSync('umount', [path.join(work, 'fs')]);
  for (const device of devices) spawnSync('losetup', ['-d', device]);
  rmSync(work, { recursive: true, force: true });
});

test.serial('a pool on a directory of an existing btrfs file system: volumes as subvolumes there, the directory kept at delete', async (t) => {
  const device = loopDevice('fs.img', 512);
  execFileSync('mkfs.btrfs', ['-q', device]);
  const mount = path.join(work, 'fs');
  mkdirSync(mount);
  execFileSync('mount', [device, mount]);
  const source = path.join(mount, 'pool');
  mkdirSync(source);
  const made = await k.inject({ method: 'POST', url: '/1.0/storage-pools', payload: { name: 'ondir', driver: 'btrfs', config: { source } } });
  t.is(made.statusCode, 200, made.body);
  const storage = k.kernel.services.get(StorageServiceRef)!;
  const vol = { type: 'custom' as const, project: 'default', name: 'v' };
  await storage.createInstanceVolume('ondir', vol, { kind: 'fill', fill: async (dir) => writeFileSync(path.join(dir, 'f'), 'x') });
  t.is(spawnSync('btrfs', ['subvolume', 'show', path.join(source, 'custom', 'v')]).status, 0);
  const withSize = await k.inject({ method: 'POST', url: '/1.0/storage-pools', payload: { name: 'sized', driver: 'btrfs', config: { source: path.join(mount, 'other'), size: '1GiB' } } });
  t.is(withSize.statusCode, 400);
  const notEmpty = await k.inject({ method: 'POST', url: '/1.0/storage-pools', payload: { name: 'again', driver: 'btrfs', config: { source } } });
  t.is(notEmpty.statusCode, 400, 'a directory holding another pool is refused');
  t.regex(notEmpty.json.error, /used by another storage pool/);
  const plain = path.join(mount, 'plain');
  mkdirSync(plain);
  writeFileSync(path.join(plain, 'data'), 'user data');
  const occupied = await k.inject({ method: 'POST', url: '/1.0/storage-pools', payload: { name: 'occupied', driver: 'btrfs', config: { source: plain } } });
  t.regex(occupied.json.error, /isn't empty/);
  t.deepEqual(readdirSync(plain), ['data'], 'nothing written into a refused directory');
  await storage.deleteVolume('ondir', vol);
  t.is((await k.inject({ method: 'DELETE', url: '/1.0/storage-pools/ondir' })).statusCode, 200);
  t.true(existsSync(source), 'the directory was the user\'s: it stays');
  t.deepEqual(readdirSync(source), [], 'emptied');
});

test.serial('a pool on a block device: formatted and mounted; a mounted device is refused as in use', async (t) => {
  const busy = await k.inject({ method: 'POST', url: '/1.0/storage-pools', payload: { name: 'busy', driver: 'btrfs', config: { source: devices[0]! } } });
  t.is(busy.statusCode, 400);
  t.regex(busy.json.error, /in use/);
  const device = loopDevice('blk.img', 512);
  const made = await k.inject({ method: 'POST', url: '/1.0/storage-pools', payload: { name: 'blk', driver: 'btrfs', config: { source: device } } });
  t.is(made.statusCode, 200, made.body);
  const root = path.join(k.dataDir, 'storage-pools', 'blk');
  t.true(readFileMounts().includes(` ${root} btrfs `));
  const res = await k.inject({ url: '/1.0/storage-pools/blk/resources' });
  t.true(res.json.metadata.space.total > 400 * 1024 * 1024);
  t.is((await k.inject({ method: 'DELETE', url: '/1.0/storage-pools/blk' })).statusCode, 200);
  t.false(readFileMounts().includes(` ${root} `), 'unmounted at delete');
  const notADevice = await k.inject({ method: 'POST', url: '/1.0/storage-pools', payload: { name: 'nodev', driver: 'btrfs', config: { source: '/dev/null' } } });
  t.is(notADevice.statusCode, 400);
});

function readFileMounts(): string {
  return execFileSync('cat', ['/proc/mounts'], { encoding: 'utf8' });
}
