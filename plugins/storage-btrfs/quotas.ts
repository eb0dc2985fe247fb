/**
 * Quotas with btrfs qgroups: `size` limits the bytes a volume references. Quota accounting is
 * switched on for a pool the first time a limit is set (it costs on every snapshot and delete,
 * so pools that never use quotas do not pay for it).
 */
import { notFound, type HostTools, type PoolInfo, type VolumeQuotas, type VolumeRef } from '../../sdk/index.js';
import { exists } from './subvolumes.js';

export class BtrfsQuotas implements VolumeQuotas {
  constructor(
    private readonly tools: HostTools,
    private readonly root: (pool: PoolInfo) => string,
    private readonly volumePath: (pool: PoolInfo, vol: VolumeRef) => string,
  ) {}

  async setQuota(pool: PoolInfo, vol: VolumeRef, bytes: number): Promise<void> {
    const at = this.volumePath(pool, vol);
    if (!(await exists(at))) throw notFound(`Volume "${vol.name}" not found on storage pool "${pool.name}"`);
    if (bytes === 0 && !(await this.enabled(pool))) return;
    await this.enable(pool);
    await this.tools.run('btrfs', ['qgroup', 'limit', bytes === 0 ? 'none' : String(bytes), at]);
  }

  async enabled(pool: PoolInfo): Promise<boolean> {
    const res = await this.tools.run('btrfs', ['qgroup', 'show', '--raw', this.root(pool)], { allowFailure: true });
    return res.exitCode === 0;
  }

  private async enable(pool: PoolInfo): Promise<void> {
    if (await this.enabled(pool)) return;
    await this.tools.run('btrfs', ['quota', 'enable', this.root(pool)]);
    // Existing subvolumes are accounted by a rescan; limits are only right once it is done.
    await this.tools.run('btrfs', ['quota', 'rescan', '-w', this.root(pool)], { timeoutMs: 10 * 60_000, allowFailure: true });
  }

  /** Referenced bytes of the subvolume at `at`, or undefined when the pool has no quota accounting. */
  async referenced(pool: PoolInfo, at: string): Promise<number | undefined> {
    const res = await this.tools.run('btrfs', ['qgroup', 'show', '-f', '--raw', '--sync', at], { allowFailure: true });
    if (res.exitCode !== 0) return undefined;
    for (const line of res.stdout.split('\n')) {
      const fields = line.trim().split(/\s+/);
      if (/^0\/\d+$/.test(fields[0] ?? '') && /^\d+$/.test(fields[1] ?? '')) return Number(fields[1]);
    }
    return undefined;
  }
}
