/**
 * Layered container volumes (docs/decisions/0075): a container made from an image shares the
 * image volume's unpacked `rootfs/` read-only and writes to its own upper layer, through an
 * overlayfs mount at `<volume>/rootfs`. The mount lives on the host for the volume's whole life,
 * so everything that reads or writes `<volume>/rootfs` (file API, templates, snapshots, exports,
 * publish, copies, migration) sees one whole tree, as with a plain volume.
 *
 * Where things are, in the pool's source:
 *   containers/<vol>/                 the volume as always (metadata.yaml, templates/, rootfs/ = the mount)
 *   containers-layers/<vol>/upper     what the instance wrote
 *   containers-layers/<vol>/work      overlayfs's scratch directory
 *   containers-layers/<vol>/base      the pool-relative path of the shared base (`images/<fp>`)
 *   images-retired/<fp>-<stamp>/      an image volume deleted while layered volumes still used it
 *
 * overlayfs cannot be mounted idmapped, so only instances that run without an id map (privileged
 * containers) are layered; `flatten` turns a layered volume into a plain one (a copy through the
 * merged view) before anything needs it whole on disk in its own right.
 */
import { chmod, chown, copyFile, lchown, lstat, mkdir, readdir, readFile, readlink, rename, rmdir, stat, symlink, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { HostTools, PoolInfo } from '../../sdk/index.js';
import { LAZY_DIRS } from './layout.js';
import { removeAllInside, removeInside } from './remove.js';

export const [LAYERS_DIR, RETIRED_DIR] = LAZY_DIRS as [string, string];
const SHORT_MS = 30_000;
const LONG_MS = 30 * 60_000;

const present = (p: string) => lstat(p).then(() => true, () => false);

/** overlayfs splits its options on commas and colons (and treats backslashes as escapes). */
const safeForOptions = (p: string) => !/[,:\\\s]/.test(p);

/**
 * Copy an image's metadata.yaml or templates/ (a few small files, directories and links) keeping
 * owners, modes and times, in process: a
 * `cp` child would cost more than the whole layered create otherwise does.
 */
async function copySmall(from: string, to: string): Promise<void> {
  const st = await lstat(from);
  if (st.isDirectory()) {
    await mkdir(to);
    for (const entry of await readdir(from)) await copySmall(path.join(from, entry), path.join(to, entry));
  } else if (st.isFile()) {
    await copyFile(from, to);
  } else if (st.isSymbolicLink()) {
    await symlink(await readlink(from), to);
    await lchown(to, st.uid, st.gid);
    return;
  } else {
    // Devices or fifos have no business in an image's metadata: left out.
    return;
  }
  await chown(to, st.uid, st.gid);
  await chmod(to, st.mode & 0o7777);
  await utimes(to, st.atime, st.mtime);
}

export class LayeredVolumes {
  /** Per pool source: whether an overlay mounts there (probed once). */
  private readonly probed = new Map<string, Promise<boolean>>();

  constructor(private readonly tools: HostTools) {}

  private source(pool: PoolInfo): string {
    return path.resolve(pool.config.source);
  }

  private layerDir(pool: PoolInfo, dirName: string): string {
    return path.join(this.source(pool), LAYERS_DIR, dirName);
  }

  /** Whether the container volume directory `dirName` is layered. */
  isLayered(pool: PoolInfo, dirName: string): Promise<boolean> {
    return present(path.join(this.layerDir(pool, dirName), 'base'));
  }

  /** This volume can be layered over this image: overlayfs works here and can be told every path. */
  async eligible(pool: PoolInfo, imageDir: string, dirName: string, volumeDir: string): Promise<boolean> {
    if (![imageDir, volumeDir, this.layerDir(pool, dirName)].every(safeForOptions)) return false;
    return this.supported(pool);
  }

  /** overlayfs works on this pool's file system (a real mount, once per pool and daemon run). */
  private supported(pool: PoolInfo): Promise<boolean> {
    const source = this.source(pool);
    let answer = this.probed.get(source);
    if (!answer) {
      answer = this.probe(source);
      this.probed.set(source, answer);
    }
    return answer;
  }

  private async probe(source: string): Promise<boolean> {
    if (!safeForOptions(source)) return false;
    const dir = path.join(source, LAYERS_DIR, `.probe-${process.pid}`);
    const parts = ['lower', 'upper', 'work', 'merged'].map((p) => path.join(dir, p));
    try {
      await mkdir(path.join(source, LAYERS_DIR), { recursive: true, mode: 0o700 });
      for (const p of parts) await mkdir(p, { recursive: true });
      await this.mountOverlay(parts[0]!, parts[1]!, parts[2]!, parts[3]!);
      await this.tools.run('umount', [parts[3]!], { timeoutMs: SHORT_MS });
      return true;
    } catch {
      return false;
    } finally {
      await removeInside(this.tools, source, path.join(source, LAYERS_DIR), path.basename(dir)).catch(() => {});
    }
  }

  private async mountOverlay(lower: string, upper: string, work: string, at: string): Promise<void> {
    // No index, no redirects, no metacopy: a base can be moved (image deleted) between mounts.
    const options = `lowerdir=${lower},upperdir=${upper},workdir=${work},index=off,redirect_dir=off,metacopy=off`;
    await this.tools.run('mount', ['-t', 'overlay', 'overlay', '-o', options, at], { timeoutMs: SHORT_MS });
  }

  /** The base's directory (pool-relative path in `base`, resolved and checked to stay in the pool). */
  private async baseOf(pool: PoolInfo, dirName: string): Promise<string> {
    const rel = (await readFile(path.join(this.layerDir(pool, dirName), 'base'), 'utf8')).trim();
    const full = path.resolve(this.source(pool), rel);
    if (!full.startsWith(this.source(pool) + path.sep)) throw new Error(`The layered volume "${dirName}" names a base outside its pool`);
    return full;
  }

  private async mounted(volumeDir: string): Promise<boolean> {
    const [outer, inner] = await Promise.all([stat(volumeDir), stat(path.join(volumeDir, 'rootfs'))]);
    return outer.dev !== inner.dev;
  }

  /** Mount the volume's merged tree at `<volumeDir>/rootfs` unless it is there already. */
  async mount(pool: PoolInfo, dirName: string, volumeDir: string): Promise<void> {
    if (await this.mounted(volumeDir)) return;
    const layer = this.layerDir(pool, dirName);
    const base = await this.baseOf(pool, dirName);
    await this.mountOverlay(path.join(base, 'rootfs'), path.join(layer, 'upper'), path.join(layer, 'work'), path.join(volumeDir, 'rootfs'));
  }

  async unmount(volumeDir: string): Promise<void> {
    const rootfs = path.join(volumeDir, 'rootfs');
    if (!(await present(volumeDir)) || !(await present(rootfs)) || !(await this.mounted(volumeDir))) return;
    await this.tools.run('umount', [rootfs], { timeoutMs: SHORT_MS });
  }

  /**
   * Make `volumeDir` (which must not exist) a layered volume over the image volume `imageDir`:
   * its metadata and templates are copied (small, and the instance may change them), its rootfs is
   * the overlay. Undoes what it did when a step fails.
   */
  async create(pool: PoolInfo, imageDir: string, dirName: string, volumeDir: string, mode: number): Promise<void> {
    // The volume first: a crash leaves a volume without a record (removed at boot) or a layer
    // without a volume (removed by mountAll), never a layer under a volume that looks finished.
    await mkdir(volumeDir, { mode });
    for (const entry of await readdir(imageDir)) if (entry !== 'rootfs') await copySmall(path.join(imageDir, entry), path.join(volumeDir, entry));
    const lowerRoot = await stat(path.join(imageDir, 'rootfs'));
    await mkdir(path.join(volumeDir, 'rootfs'), { mode: lowerRoot.mode & 0o7777 });
    const layer = this.layerDir(pool, dirName);
    await mkdir(path.dirname(layer), { recursive: true, mode: 0o700 });
    try {
      await mkdir(layer, { mode: 0o700 });
      await mkdir(path.join(layer, 'upper'), { mode: 0o755 });
      await mkdir(path.join(layer, 'work'), { mode: 0o700 });
      await writeFile(path.join(layer, 'base'), path.relative(this.source(pool), imageDir) + '\n');
      await this.mount(pool, dirName, volumeDir);
    } catch (err) {
      await this.remove(pool, dirName, volumeDir).catch(() => {});
      throw err;
    }
  }

  /** Unmount and drop the upper layer; the volume directory itself is the caller's. */
  async remove(pool: PoolInfo, dirName: string, volumeDir: string): Promise<void> {
    await this.unmount(volumeDir);
    await this.drop(pool, dirName);
  }

  /** Drop the layer (unmounted), and the retired base it used when it was the last user. */
  async drop(pool: PoolInfo, dirName: string): Promise<void> {
    await this.dropWith(pool, dirName, []);
  }

  /**
   * Drop the layer together with other entries of the pool (a deleted volume's directory) in one
   * removal: the layer is named last, so a crash can leave a layer without its volume (dropped by
   * mountAll), never a volume without its layer.
   */
  async dropWith(pool: PoolInfo, dirName: string, also: { parent: string; entry: string }[]): Promise<void> {
    const base = await this.baseOf(pool, dirName).catch(() => undefined);
    await removeAllInside(this.tools, this.source(pool), [...also, { parent: path.join(this.source(pool), LAYERS_DIR), entry: dirName }]);
    if (base) await this.releaseRetired(pool, base);
  }

  /**
   * Make the volume plain: the merged tree is copied beside the mount, the overlay goes, the copy
   * takes its place. The volume stays whole at every step (a failure before the swap leaves it layered).
   */
  async flatten(pool: PoolInfo, dirName: string, volumeDir: string): Promise<void> {
    if (!(await this.isLayered(pool, dirName))) return;
    await this.mount(pool, dirName, volumeDir);
    const rootfs = path.join(volumeDir, 'rootfs');
    const copy = path.join(volumeDir, '.rootfs-flat');
    await removeInside(this.tools, this.source(pool), volumeDir, '.rootfs-flat');
    try {
      await this.tools.run('cp', ['-a', '--reflink=auto', '--no-target-directory', '--', rootfs, copy], { timeoutMs: LONG_MS, endWithDaemon: true });
      await this.unmount(volumeDir);
    } catch (err) {
      await removeInside(this.tools, this.source(pool), volumeDir, '.rootfs-flat').catch(() => {});
      throw err;
    }
    await rmdir(rootfs);
    await rename(copy, rootfs);
    await this.drop(pool, dirName);
  }

  /** A stopped volume is renamed with its layer: unmounted, both moved, mounted again. */
  async rename(pool: PoolInfo, fromDir: string, toDir: string, fromVolume: string, toVolume: string, moveVolume: () => Promise<void>): Promise<void> {
    await this.unmount(fromVolume);
    const from = this.layerDir(pool, fromDir);
    const to = this.layerDir(pool, toDir);
    try {
      await rename(from, to);
    } catch (err) {
      await this.mount(pool, fromDir, fromVolume).catch(() => {});
      throw err;
    }
    try {
      await moveVolume();
    } catch (err) {
      await rename(to, from).catch(() => {});
      await this.mount(pool, fromDir, fromVolume).catch(() => {});
      throw err;
    }
    await this.mount(pool, toDir, toVolume);
  }

  /** Volume directory names of the layered volumes, with their base. */
  private async users(pool: PoolInfo): Promise<{ dirName: string; base: string }[]> {
    const entries = await readdir(path.join(this.source(pool), LAYERS_DIR)).catch(() => [] as string[]);
    const names = entries.filter((e) => !e.startsWith('.'));
    const out: { dirName: string; base: string }[] = [];
    for (let i = 0; i < names.length; i += 64) {
      const bases = await Promise.all(names.slice(i, i + 64).map((dirName) => this.baseOf(pool, dirName).catch(() => undefined)));
      bases.forEach((base, j) => {
        if (base) out.push({ dirName: names[i + j]!, base });
      });
    }
    return out;
  }

  /**
   * Mount every layered volume of the pool that is not mounted (daemon start), and finish what a
   * crash interrupted: a layer without its volume goes; a flatten stopped between its two renames
   * is completed; a layer under a rootfs that is not its empty mount point (a restore or flatten
   * done, its layer not yet dropped) goes. One volume's failure does not make the pool unusable.
   */
  async mountAll(pool: PoolInfo, volumeDirOf: (dirName: string) => string): Promise<void> {
    const users = await this.users(pool);
    // A few at a time: a daemon start with thousands of layered volumes is mostly stats of mounted ones.
    for (let i = 0; i < users.length; i += 16) {
      await Promise.all(users.slice(i, i + 16).map(({ dirName }) => this.settle(pool, dirName, volumeDirOf(dirName))));
    }
  }

  private async settle(pool: PoolInfo, dirName: string, volumeDir: string): Promise<void> {
    const rootfs = path.join(volumeDir, 'rootfs');
    try {
      if (!(await present(volumeDir))) return await this.drop(pool, dirName);
      if (!(await present(rootfs)) && (await present(path.join(volumeDir, '.rootfs-flat')))) {
        await rename(path.join(volumeDir, '.rootfs-flat'), rootfs);
        return await this.drop(pool, dirName);
      }
      if (!(await this.mounted(volumeDir)) && (await readdir(rootfs)).length > 0) return await this.drop(pool, dirName);
      await this.mount(pool, dirName, volumeDir);
    } catch {
      // Left as it is: the instance's start or delete reports the problem.
    }
  }

  /** Unmount every layered volume (the pool is being deleted). */
  async unmountAll(pool: PoolInfo, volumeDirOf: (dirName: string) => string): Promise<void> {
    for (const { dirName } of await this.users(pool)) await this.unmount(volumeDirOf(dirName)).catch(() => {});
  }

  /**
   * The image volume `imageDir` is being deleted. When layered volumes use it, it is moved aside
   * (their mounts keep working: a rename does not disturb them) and they are pointed at its new
   * place; the last of them to go removes it. Returns whether it was kept.
   */
  async retireIfUsed(pool: PoolInfo, imageDir: string): Promise<boolean> {
    const users = (await this.users(pool)).filter((u) => u.base === imageDir);
    if (!users.length) return false;
    const retired = path.join(this.source(pool), RETIRED_DIR, `${path.basename(imageDir)}-${Date.now().toString(36)}`);
    await mkdir(path.dirname(retired), { recursive: true, mode: 0o700 });
    await rename(imageDir, retired);
    const rel = path.relative(this.source(pool), retired) + '\n';
    for (const u of users) await writeFile(path.join(this.layerDir(pool, u.dirName), 'base'), rel);
    return true;
  }

  /** A retired base nobody uses any more goes. */
  private async releaseRetired(pool: PoolInfo, base: string): Promise<void> {
    const retiredRoot = path.join(this.source(pool), RETIRED_DIR);
    if (path.dirname(base) !== retiredRoot) return;
    if ((await this.users(pool)).some((u) => u.base === base)) return;
    await removeInside(this.tools, this.source(pool), retiredRoot, path.basename(base));
  }
}
