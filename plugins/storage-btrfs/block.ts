/**
 * Block volumes on btrfs: a subvolume holding one sparse `root.img`, copy-on-write switched off for
 * it (a disk image rewritten in place fragments badly under COW), as the reference lays them out.
 */
import { open } from 'node:fs/promises';
import path from 'node:path';
import { BLOCK_IMAGE, type BlockVolumes, type HostTools, type PoolInfo, type StorageDriver, type VolumeRef } from '../../sdk/index.js';

export class BtrfsBlockVolumes implements BlockVolumes {
  constructor(private readonly tools: HostTools, private readonly driver: StorageDriver) {}

  async create(pool: PoolInfo, vol: VolumeRef, bytes: number): Promise<void> {
    await this.driver.createVolume(pool, vol, async (dir) => {
      const file = path.join(dir, BLOCK_IMAGE);
      const handle = await open(file, 'wx', 0o600);
      await handle.close();
      // +C only takes on an empty file.
      await this.tools.run('chattr', ['+C', '--', file], { allowFailure: true });
      const again = await open(file, 'r+');
      try {
        await again.truncate(bytes);
      } finally {
        await again.close();
      }
    });
  }

  blockPath(pool: PoolInfo, vol: VolumeRef): string {
    return path.join(this.driver.volumePath(pool, vol), BLOCK_IMAGE);
  }
}
