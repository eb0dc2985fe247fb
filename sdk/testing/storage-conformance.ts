/**
 * The storage driver conformance suite. A driver plugin runs it against itself from one ava test
 * file:
 *
 *   storageDriverConformance({
 *     driver: 'btrfs',
 *     factory: driverFromPlugins(['storage', 'storage-btrfs'], 'btrfs'),
 *     poolConfig: () => ({ size: '1GiB' }),
 *   });
 *
 * It registers serial ava tests on the real driver (real files, real host tools): the pool
 * lifecycle, the required core on volumes, and each optional capability the driver has (the rest
 * are skipped, named in the test title). Every test checks that what it did is gone afterwards.
 */
import test, { type ExecutionContext } from 'ava';
import { execFileSync } from 'node:child_process';
import { lstat, mkdir, mkdtemp, readFile, readdir, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { createReadStream, createWriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import {
  canBlock, canQuota, canRefresh, canReportUsage, canSendReceive, canSnapshot, driverCapabilities, isApiError,
  StorageServiceRef, type PoolInfo, type StorageCapability, type StorageDriver, type VolumeRef, type VolumeType,
} from '../index.js';
import { startTestKernel } from './index.js';

export interface DriverUnderTest {
  driver: StorageDriver;
  /** The daemon data directory the driver was given (pools default under it). */
  dataDir: string;
  dispose(): Promise<void>;
}

export interface ConformanceOptions {
  /** The driver's name (test titles, pool records). */
  driver: string;
  /** Makes the driver under test once for the file. */
  factory: () => Promise<DriverUnderTest>;
  /** Config of a scratch pool; `scratch` is an empty directory the suite removes at the end. */
  poolConfig?: (scratch: string) => Record<string, string>;
  /** The optional capabilities the driver has: checked against the driver, and each one tested. */
  capabilities: StorageCapability[];
}

/** A factory that loads the driver's plugins into a test kernel, as the daemon would, and takes the driver it registered. */
export function driverFromPlugins(plugins: string[], driverName: string): () => Promise<DriverUnderTest> {
  return async () => {
    const kernel = await startTestKernel({ plugins });
    const driver = kernel.kernel.services.get(StorageServiceRef)?.driver(driverName);
    if (!driver) {
      await kernel.stop();
      throw new Error(`no storage driver "${driverName}" is registered by ${plugins.join(', ')}`);
    }
    return { driver, dataDir: kernel.dataDir, dispose: () => kernel.stop() };
  };
}

const MiB = 1024 * 1024;
const present = (p: string) => lstat(p).then(() => true, () => false);
const statusOf = async (p: Promise<unknown>): Promise<number | string> => {
  try {
    await p;
    return 'resolved';
  } catch (err) {
    return isApiError(err) ? err.status : (err as Error).message;
  }
};

/** A small tree with what volumes must keep: modes, a symlink, a hard link, a nested directory. */
async function writeSample(dir: string, marker: string): Promise<void> {
  await mkdir(path.join(dir, 'rootfs', 'etc'), { recursive: true, mode: 0o755 });
  await writeFile(path.join(dir, 'rootfs', 'etc', 'marker'), marker);
  await writeFile(path.join(dir, 'rootfs', 'secret'), 'x', { mode: 0o600 });
  await symlink('etc/marker', path.join(dir, 'rootfs', 'link'));
  execFileSync('ln', [path.join(dir, 'rootfs', 'etc', 'marker'), path.join(dir, 'rootfs', 'hard')]);
}

async function checkSample(dir: string, marker: string): Promise<string | undefined> {
  const text = await readFile(path.join(dir, 'rootfs', 'etc', 'marker'), 'utf8').catch(() => undefined);
  if (text !== marker) return `marker is ${JSON.stringify(text)}, expected ${JSON.stringify(marker)}`;
  if (((await stat(path.join(dir, 'rootfs', 'secret'))).mode & 0o777) !== 0o600) return 'mode of secret lost';
  if ((await readlink(path.join(dir, 'rootfs', 'link'))) !== 'etc/marker') return 'symlink lost';
  const [a, b] = await Promise.all([lstat(path.join(dir, 'rootfs', 'etc', 'marker')), lstat(path.join(dir, 'rootfs', 'hard'))]);
  if (a.ino !== b.ino) return 'hard link lost';
  return undefined;
}

const TYPES: VolumeType[] = ['container', 'virtual-machine', 'image', 'custom'];

export function storageDriverConformance(opts: ConformanceOptions): void {
  let sut: DriverUnderTest;
  let scratch: string;
  let pool: PoolInfo;
  let counter = 0;
  const vol = (name: string, type: VolumeType = 'custom', project = 'default'): VolumeRef => ({ type, project, name });
  const newPool = async (label: string): Promise<PoolInfo> => {
    const dir = await mkdtemp(path.join(scratch, `${label}-`));
    const info: PoolInfo = { name: `conf${process.pid}x${++counter}`, driver: opts.driver, config: { ...(opts.poolConfig?.(dir) ?? {}) } };
    sut.driver.fillDefaults?.(info, sut.dataDir);
    return info;
  };
  const title = (what: string) => `${opts.driver} conformance: ${what}`;
  const expected = new Set(opts.capabilities);
  /** Tests of a capability the driver does not declare are registered as skipped, named as such. */
  const capabilityTest = (capability: StorageCapability, what: string, fn: (t: ExecutionContext) => Promise<void>) => {
    if (expected.has(capability)) test.serial(title(what), fn);
    else test.serial.skip(title(`${what} (no ${capability} capability)`), fn);
  };

  test.before(async () => {
    sut = await opts.factory();
    scratch = await mkdtemp(path.join(tmpdir(), `corral-conformance-${opts.driver}-`));
    pool = await newPool('shared');
    await sut.driver.create(pool);
    await sut.driver.mount(pool);
  });

  test.after.always(async () => {
    if (pool) await sut?.driver.delete(pool).catch(() => {});
    await sut?.dispose();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  /** A failed test's volumes must not fail the next ones: swept after each test (its own assertEmpty judged it). */
  test.afterEach.always(async () => {
    for (const type of TYPES) for (const v of await sut.driver.listVolumes(pool, type)) await sut.driver.deleteVolume(pool, v).catch(() => {});
  });

  /** Every volume a test made must be gone when it ends: the suite's pool stays empty between tests. */
  const assertEmpty = async (t: { deepEqual: (a: unknown, b: unknown, m?: string) => void }) => {
    for (const type of TYPES) t.deepEqual(await sut.driver.listVolumes(pool, type), [], `leftover ${type} volumes`);
  };

  test.serial(title('the driver has the capabilities it declares, and no others'), (t) => {
    t.deepEqual(new Set(driverCapabilities(sut.driver)), expected);
  });

  test.serial(title('pool create, mount, resources, unmount, delete'), async (t) => {
    const p = await newPool('lifecycle');
    await sut.driver.create(p);
    await sut.driver.mount(p);
    await sut.driver.mount(p); // idempotent: boot mounts pools that may be mounted already
    const res = await sut.driver.resources(p);
    t.true(res.space.total > 0 && res.space.used >= 0 && res.space.used <= res.space.total);
    await sut.driver.createVolume(p, vol('keep'), (dir) => writeFile(path.join(dir, 'f'), 'kept'));
    if (sut.driver.unmount) {
      await sut.driver.unmount(p);
      await sut.driver.mount(p);
    }
    t.is(await readFile(path.join(sut.driver.volumePath(p, vol('keep')), 'f'), 'utf8'), 'kept', 'a volume survives unmount and mount');
    await sut.driver.delete(p);
    t.not(await statusOf(sut.driver.mount(p)), 'resolved', 'a deleted pool cannot be mounted');
  });

  test.serial(title('volume create filled from a directory and from a tarball'), async (t) => {
    const src = await mkdtemp(path.join(scratch, 'src-'));
    await writeSample(src, 'from-dir');
    await sut.driver.createVolume(pool, vol('fromdir'), async (dir) => {
      execFileSync('cp', ['-a', '--no-target-directory', `${src}/.`, dir]);
    });
    t.is(await checkSample(sut.driver.volumePath(pool, vol('fromdir')), 'from-dir'), undefined);
    const tarball = path.join(scratch, 'sample.tar');
    execFileSync('tar', ['-cf', tarball, '-C', src, '.']);
    await sut.driver.createVolume(pool, vol('c1', 'container'), async (dir) => {
      execFileSync('tar', ['-xf', tarball, '-C', dir]);
    });
    t.is(await checkSample(sut.driver.volumePath(pool, vol('c1', 'container')), 'from-dir'), undefined);
    t.deepEqual((await sut.driver.listVolumes(pool, 'container')).map((v) => v.name), ['c1']);
    t.deepEqual((await sut.driver.listVolumes(pool, 'custom')).map((v) => v.name), ['fromdir']);
    t.is(await statusOf(sut.driver.createVolume(pool, vol('fromdir'))), 409, 'an existing volume is a conflict');
    t.is(await checkSample(sut.driver.volumePath(pool, vol('fromdir')), 'from-dir'), undefined, 'and is left untouched');
    await sut.driver.deleteVolume(pool, vol('fromdir'));
    await sut.driver.deleteVolume(pool, vol('c1', 'container'));
    await sut.driver.deleteVolume(pool, vol('never-made')); // absent: nothing to do
    t.false(await present(sut.driver.volumePath(pool, vol('fromdir'))));
    await assertEmpty(t);
  });

  test.serial(title('a failed fill leaves nothing behind'), async (t) => {
    const failed = await statusOf(sut.driver.createVolume(pool, vol('broken'), async (dir) => {
      await writeFile(path.join(dir, 'partial'), 'half');
      throw new Error('fill failed on purpose');
    }));
    t.is(failed, 'fill failed on purpose');
    t.false(await present(sut.driver.volumePath(pool, vol('broken'))));
    await assertEmpty(t);
    await sut.driver.createVolume(pool, vol('broken'));
    t.deepEqual(await readdir(sut.driver.volumePath(pool, vol('broken'))), [], 'the name is free and the new volume empty');
    await sut.driver.deleteVolume(pool, vol('broken'));
  });

  test.serial(title('volume rename, also into another project'), async (t) => {
    await sut.driver.createVolume(pool, vol('a'), (dir) => writeSample(dir, 'renamed'));
    await sut.driver.createVolume(pool, vol('taken'));
    t.is(await statusOf(sut.driver.renameVolume(pool, vol('a'), 'taken')), 409);
    await sut.driver.renameVolume(pool, vol('a'), 'b');
    t.false(await present(sut.driver.volumePath(pool, vol('a'))));
    t.is(await checkSample(sut.driver.volumePath(pool, vol('b')), 'renamed'), undefined);
    await sut.driver.renameVolume(pool, vol('b'), 'b', 'other');
    t.deepEqual(await sut.driver.listVolumes(pool, 'custom'), [vol('b', 'custom', 'other'), vol('taken')]);
    t.is(await checkSample(sut.driver.volumePath(pool, vol('b', 'custom', 'other')), 'renamed'), undefined);
    t.is(await statusOf(sut.driver.renameVolume(pool, vol('ghost'), 'ghost2')), 404);
    await sut.driver.deleteVolume(pool, vol('b', 'custom', 'other'));
    await sut.driver.deleteVolume(pool, vol('taken'));
    await assertEmpty(t);
  });

  test.serial(title('volume copy is independent of its source'), async (t) => {
    await sut.driver.createVolume(pool, vol('img', 'image'), (dir) => writeSample(dir, 'image'));
    await sut.driver.cloneVolume(pool, vol('img', 'image'), vol('c2', 'container'));
    t.is(await checkSample(sut.driver.volumePath(pool, vol('c2', 'container')), 'image'), undefined);
    await writeFile(path.join(sut.driver.volumePath(pool, vol('c2', 'container')), 'rootfs', 'etc', 'marker'), 'changed');
    t.is(await checkSample(sut.driver.volumePath(pool, vol('img', 'image')), 'image'), undefined, 'the source is untouched');
    t.not(await statusOf(sut.driver.cloneVolume(pool, vol('img', 'image'), vol('c2', 'container'))), 'resolved', 'no copy over an existing volume');
    t.not(await statusOf(sut.driver.cloneVolume(pool, vol('missing', 'image'), vol('c3', 'container'))), 'resolved');
    t.false(await present(sut.driver.volumePath(pool, vol('c3', 'container'))), 'a failed copy leaves no target');
    await sut.driver.deleteVolume(pool, vol('c2', 'container'));
    await sut.driver.deleteVolume(pool, vol('img', 'image'));
    await assertEmpty(t);
  });

  capabilityTest('usage', 'usage', async (t) => {
    if (!canReportUsage(sut.driver)) return t.fail();
    await sut.driver.createVolume(pool, vol('u'), (dir) => writeFile(path.join(dir, 'blob'), Buffer.alloc(4 * MiB, 7)));
    const used = await sut.driver.volumeUsage(pool, vol('u'));
    t.true(used !== undefined && used >= 4 * MiB, `usage ${used}`);
    await sut.driver.deleteVolume(pool, vol('u'));
  });

  capabilityTest('snapshots', 'snapshots: create, restore, rename, delete, copy from one, fill', async (t) => {
    if (!canSnapshot(sut.driver)) return t.fail();
    const snaps = sut.driver.snapshots;
    const v = vol('s1', 'container');
    await sut.driver.createVolume(pool, v, (dir) => writeSample(dir, 'one'));
    await snaps.create(pool, v, 'snap0');
    t.is(await statusOf(snaps.create(pool, v, 'snap0')), 409);
    await writeFile(path.join(sut.driver.volumePath(pool, v), 'rootfs', 'etc', 'marker'), 'two');
    t.is(await checkSample(snaps.path(pool, v, 'snap0'), 'one'), undefined, 'the snapshot keeps the old content');
    await snaps.create(pool, v, 'snap1');
    t.deepEqual(await snaps.list(pool, v), ['snap0', 'snap1']);
    await snaps.restore(pool, v, 'snap0');
    t.is(await checkSample(sut.driver.volumePath(pool, v), 'one'), undefined, 'restored');
    t.is(await statusOf(snaps.restore(pool, v, 'nope')), 404);
    await snaps.rename(pool, v, 'snap1', 'later');
    t.deepEqual(await snaps.list(pool, v), ['later', 'snap0']);
    t.is(await checkSample(snaps.path(pool, v, 'later'), 'two'), undefined);
    t.is(await statusOf(snaps.rename(pool, v, 'later', 'snap0')), 409);
    await sut.driver.cloneVolume(pool, v, vol('s2', 'container'), 'later');
    t.is(await checkSample(sut.driver.volumePath(pool, vol('s2', 'container')), 'two'), undefined, 'copy of a snapshot');
    await writeFile(path.join(sut.driver.volumePath(pool, vol('s2', 'container')), 'rootfs', 'new'), 'writable');
    await snaps.create(pool, vol('s2', 'container'), 'filled', (dir) => writeSample(dir, 'filled'));
    t.is(await checkSample(snaps.path(pool, vol('s2', 'container'), 'filled'), 'filled'), undefined);
    t.is(await statusOf(snaps.create(pool, vol('s2', 'container'), 'bad', async () => { throw new Error('no'); })), 'no');
    t.deepEqual(await snaps.list(pool, vol('s2', 'container')), ['filled'], 'a failed fill leaves no snapshot');
    if (snaps.listMany) {
      const some = [vol('s2', 'container'), vol('none', 'container'), v];
      t.deepEqual(await snaps.listMany(pool, 'container', some), [['filled'], [], ['later', 'snap0']], 'listMany answers what list answers, in order');
    }
    await snaps.delete(pool, v, 'snap0');
    t.deepEqual(await snaps.list(pool, v), ['later']);
    await sut.driver.renameVolume(pool, v, 's3');
    t.deepEqual(await snaps.list(pool, vol('s3', 'container')), ['later'], 'snapshots follow a rename');
    await sut.driver.deleteVolume(pool, vol('s3', 'container'));
    await sut.driver.deleteVolume(pool, vol('s2', 'container'));
    t.deepEqual(await snaps.list(pool, vol('s3', 'container')), [], 'snapshots go with their volume');
    await assertEmpty(t);
  });

  capabilityTest('quotas', 'quotas are enforced', async (t) => {
    if (!canQuota(sut.driver)) return t.fail();
    const v = vol('q');
    await sut.driver.createVolume(pool, v);
    await sut.driver.quotas.setQuota(pool, v, 16 * MiB);
    const file = path.join(sut.driver.volumePath(pool, v), 'fill');
    const over = await statusOf(writeSync(file, 48));
    t.not(over, 'resolved', 'writing past the limit fails');
    await rm(file, { force: true });
    execFileSync('sync');
    await sut.driver.quotas.setQuota(pool, v, 0);
    t.is(await statusOf(writeSync(file, 48)), 'resolved', 'no limit after removing it');
    await sut.driver.deleteVolume(pool, v);
    await assertEmpty(t);
  });

  capabilityTest('optimized backups', 'optimized backup round trip', async (t) => {
    if (!canSendReceive(sut.driver)) return t.fail();
    if (!canSnapshot(sut.driver)) return t.fail('send/receive needs snapshots');
    const v = vol('b1');
    await sut.driver.createVolume(pool, v, (dir) => writeSample(dir, 'first'));
    await sut.driver.snapshots.create(pool, v, 'one');
    await writeFile(path.join(sut.driver.volumePath(pool, v), 'rootfs', 'etc', 'marker'), 'second');
    await sut.driver.snapshots.create(pool, v, 'two');
    await writeFile(path.join(sut.driver.volumePath(pool, v), 'rootfs', 'etc', 'marker'), 'third');
    // One stream per part, in send's order: the snapshots oldest first, then the volume.
    const files = new Map<string | undefined, string>();
    const order: (string | undefined)[] = [];
    await sut.driver.sendReceive.send(pool, v, ['one', 'two'], async (part, stream) => {
      const file = path.join(scratch, `part-${order.length}.stream`);
      await pipeline(stream, createWriteStream(file));
      files.set(part, file);
      order.push(part);
    }, (dir) => writeFile(path.join(dir, 'amended'), 'only in the sent copy'));
    t.false(await present(path.join(sut.driver.volumePath(pool, v), 'amended')), 'amend leaves the volume itself untouched');
    t.deepEqual(order, ['one', 'two', undefined], 'parts come oldest snapshot first, the volume last');
    const open = async (part: string | undefined) => createReadStream(files.get(part)!);
    const prepared: (string | undefined)[] = [];
    await sut.driver.sendReceive.receive(pool, vol('b2'), ['one', 'two'], open, async (dir, part) => {
      prepared.push(part);
      await writeFile(path.join(dir, 'prepared'), String(part));
    });
    t.deepEqual([...prepared].sort(), ['one', 'two', undefined].sort(), 'prepare sees every part');
    t.is(await checkSample(sut.driver.volumePath(pool, vol('b2')), 'third'), undefined);
    t.deepEqual(await sut.driver.snapshots.list(pool, vol('b2')), ['one', 'two']);
    t.is(await checkSample(sut.driver.snapshots.path(pool, vol('b2'), 'one'), 'first'), undefined);
    t.is(await checkSample(sut.driver.snapshots.path(pool, vol('b2'), 'two'), 'second'), undefined);
    t.is(await readFile(path.join(sut.driver.snapshots.path(pool, vol('b2'), 'one'), 'prepared'), 'utf8'), 'one', 'what prepare wrote is in the snapshot');
    t.is(await readFile(path.join(sut.driver.volumePath(pool, vol('b2')), 'prepared'), 'utf8'), 'undefined');
    t.is(await readFile(path.join(sut.driver.volumePath(pool, vol('b2')), 'amended'), 'utf8'), 'only in the sent copy', 'what amend wrote travels with the volume');
    t.false(await present(path.join(sut.driver.snapshots.path(pool, vol('b2'), 'two'), 'amended')), 'and not with the snapshots');
    await writeFile(path.join(sut.driver.volumePath(pool, vol('b2')), 'rootfs', 'etc', 'marker'), 'writable');
    // The volume alone (no snapshots) is a whole stream of its own.
    files.clear();
    await sut.driver.sendReceive.send(pool, v, [], async (part, stream) => {
      const file = path.join(scratch, 'alone.stream');
      await pipeline(stream, createWriteStream(file));
      files.set(part, file);
    });
    await sut.driver.sendReceive.receive(pool, vol('b4'), [], open);
    t.is(await checkSample(sut.driver.volumePath(pool, vol('b4')), 'third'), undefined);
    t.deepEqual(await sut.driver.snapshots.list(pool, vol('b4')), []);
    await writeFile(path.join(scratch, 'garbage.stream'), 'not a stream at all');
    t.not(await statusOf(sut.driver.sendReceive.receive(pool, vol('b3'), [], async () => createReadStream(path.join(scratch, 'garbage.stream')))), 'resolved');
    t.false(await present(sut.driver.volumePath(pool, vol('b3'))), 'a bad stream leaves no volume');
    await sut.driver.deleteVolume(pool, v);
    await sut.driver.deleteVolume(pool, vol('b2'));
    await sut.driver.deleteVolume(pool, vol('b4'));
    await assertEmpty(t);
  });

  capabilityTest('refresh', 'refresh on one pool', async (t) => {
    if (!canRefresh(sut.driver)) return t.fail();
    if (!canSnapshot(sut.driver)) return t.fail('refresh needs snapshots');
    const [src, dst] = [vol('r1'), vol('r2')];
    await sut.driver.createVolume(pool, src, (dir) => writeSample(dir, 'old'));
    await sut.driver.snapshots.create(pool, src, 'a');
    await sut.driver.cloneVolume(pool, src, dst);
    await sut.driver.snapshots.create(pool, dst, 'a');
    await writeFile(path.join(sut.driver.volumePath(pool, src), 'rootfs', 'etc', 'marker'), 'new');
    await sut.driver.snapshots.create(pool, src, 'b');
    await sut.driver.refresh.refresh(pool, src, dst, ['a', 'b']);
    t.is(await checkSample(sut.driver.volumePath(pool, dst), 'new'), undefined);
    t.deepEqual(await sut.driver.snapshots.list(pool, dst), ['a', 'b']);
    await sut.driver.deleteVolume(pool, src);
    await sut.driver.deleteVolume(pool, dst);
    await assertEmpty(t);
  });

  capabilityTest('block volumes', 'block volumes', async (t) => {
    if (!canBlock(sut.driver)) return t.fail();
    const v = vol('blk', 'virtual-machine');
    await sut.driver.blockVolumes.create(pool, v, 64 * MiB);
    t.is((await stat(sut.driver.blockVolumes.blockPath(pool, v))).size, 64 * MiB);
    await sut.driver.deleteVolume(pool, v);
    await assertEmpty(t);
  });
}

/** Write `mib` MiB to `file` with dd (synchronous writes, so a quota trips at once). */
async function writeSync(file: string, mib: number): Promise<void> {
  execFileSync('dd', ['if=/dev/zero', `of=${file}`, 'bs=1M', `count=${mib}`, 'oflag=sync', 'status=none'], { stdio: 'pipe' });
}
