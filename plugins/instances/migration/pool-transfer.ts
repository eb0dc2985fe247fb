/**
 * What a pool says about migrations from or into it: whether it speaks btrfs streams (its driver's
 * optimized format), and its `rsync.bwlimit` / `rsync.compression` keys for the rsync fallback.
 */
import type { StorageService } from '../../../sdk/index.js';

export interface PoolTransfer {
  btrfs: boolean;
  rsync: { bwlimit?: string; compress: boolean };
}

export async function poolTransfer(storage: StorageService, pool: string): Promise<PoolTransfer> {
  const info = await storage.pool(pool);
  return {
    btrfs: (await storage.optimizedFormat(pool)) === 'btrfs',
    rsync: { bwlimit: info.config['rsync.bwlimit'] || undefined, compress: !['false', '0', 'off', 'no'].includes((info.config['rsync.compression'] ?? '').toLowerCase()) },
  };
}
