/**
 * A vendor storage driver, kept outside plugins/ as the template for third parties: the required
 * core of StorageDriver only (no optional capability, so the storage family itself answers
 * "not supported" for snapshots, quotas, ...). Volumes are plain directories under the pool's
 * source. It is declared in plugin-registry.json (`storage-example`, entry under examples/) and
 * runs the driver conformance suite in test/plugins/storage-conformance-example.test.ts. It imports
 * the contract by package name (`corral/sdk`), never by a path into corral, so the same file works
 * installed as the npm package its package.json describes (test/kernel/vendor-package.test.ts).
 */
import { mkdir, readdir, rename, rm, statfs } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import path from 'node:path';
import {
  StorageExtensionPointRef, badRequest, conflict, definePlugin, notFound,
  type HostTools, type PoolInfo, type StorageDriver, type VolumeRef, type VolumeType,
} from 'corral/sdk';

const safe = (name: string) => {
  if (!name || name.startsWith('.') || name.includes('/')) throw badRequest(`Invalid volume name "${name}"`);
  return name;
};

export class ExampleDriver implements StorageDriver {
  readonly name = 'example';

  constructor(private readonly tools: HostTools) {}

  fillDefaults(pool: PoolInfo, dataDir: string): void {
    pool.config.source ||= path.join(dataDir, 'storage-pools', pool.name);
  }

  async create(pool: PoolInfo): Promise<void> {
    if (existsSync(pool.config.source!)) throw badRequest(`Source "${pool.config.source}" already exists`);
    await mkdir(pool.config.source!, { recursive: true, mode: 0o711 });
  }

  async delete(pool: PoolInfo): Promise<void> {
    await rm(pool.config.source!, { recursive: true, force: true });
  }

  async mount(pool: PoolInfo): Promise<void> {
    if (!existsSync(pool.config.source!)) throw new Error(`Source "${pool.config.source}" is missing`);
  }

  async resources(pool: PoolInfo) {
    const fs = await statfs(pool.config.source!);
    return { space: { used: (fs.blocks - fs.bfree) * fs.bsize, total: fs.blocks * fs.bsize }, inodes: { used: fs.files - fs.ffree, total: fs.files } };
  }

  volumePath(pool: PoolInfo, vol: VolumeRef): string {
    return path.join(pool.config.source!, vol.type, `${safe(vol.project)}_${vol.type === 'image' ? vol.name : safe(vol.name)}`);
  }

  /** Filled under a dot name and renamed into place: a volume that exists is whole. */
  async createVolume(pool: PoolInfo, vol: VolumeRef, fill?: (dir: string) => Promise<void>): Promise<void> {
    const final = this.volumePath(pool, vol);
    if (existsSync(final)) throw conflict(`Volume "${vol.name}" already exists`);
    const scratch = path.join(path.dirname(final), `.new-${path.basename(final)}`);
    await rm(scratch, { recursive: true, force: true });
    await mkdir(scratch, { recursive: true, mode: 0o711 });
    try {
      await fill?.(scratch);
      await rename(scratch, final);
    } catch (err) {
      await rm(scratch, { recursive: true, force: true });
      throw err;
    }
  }

  async cloneVolume(pool: PoolInfo, source: VolumeRef, target: VolumeRef): Promise<void> {
    const from = this.volumePath(pool, source);
    if (!existsSync(from)) throw notFound(`Volume "${source.name}" not found`);
    await this.createVolume(pool, target, (dir) => this.tools.run('cp', ['-a', '--no-target-directory', '--', from, dir]).then(() => undefined));
  }

  async deleteVolume(pool: PoolInfo, vol: VolumeRef): Promise<void> {
    await rm(this.volumePath(pool, vol), { recursive: true, force: true });
  }

  async renameVolume(pool: PoolInfo, vol: VolumeRef, newName: string, newProject = vol.project): Promise<void> {
    const to = this.volumePath(pool, { ...vol, name: newName, project: newProject });
    if (existsSync(to)) throw conflict(`Volume "${newName}" already exists`);
    await rename(this.volumePath(pool, vol), to).catch(() => {
      throw notFound(`Volume "${vol.name}" not found`);
    });
  }

  async listVolumes(pool: PoolInfo, type: VolumeType): Promise<VolumeRef[]> {
    const entries = await readdir(path.join(pool.config.source!, type)).catch(() => [] as string[]);
    return entries.filter((e) => !e.startsWith('.')).map((e) => {
      const cut = e.indexOf('_');
      return { type, project: e.slice(0, cut), name: e.slice(cut + 1) };
    }).sort((a, b) => a.name.localeCompare(b.name));
  }
}

export default definePlugin({
  register(ctx) {
    const storage = ctx.extensionPoints.get(StorageExtensionPointRef);
    if (!storage) throw new Error('storage-example needs the "storage" plugin');
    storage.registerDriver(new ExampleDriver(ctx.hostTools));
  },
});
