/**
 * The highest guest memory usage the daemon has seen for each running VM. A guest's /proc/meminfo
 * has no peak, and QEMU's resident peak is not the guest's: so `usage_peak` is the highest usage
 * the agent reported since the VM started (or since this daemon adopted it).
 */
export class MemoryPeaks {
  private readonly peaks = new Map<string, number>();

  /** Records a reading of `key`'s VM and answers its peak so far. */
  seen(key: string, usage: number): number {
    const peak = Math.max(this.peaks.get(key) ?? 0, usage);
    this.peaks.set(key, peak);
    return peak;
  }

  peak(key: string): number {
    return this.peaks.get(key) ?? 0;
  }

  forget(key: string): void {
    this.peaks.delete(key);
  }
}
