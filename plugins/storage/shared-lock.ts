/**
 * Shared/exclusive locks by key. Volume work on a pool (and clones of one image) runs side by side
 * under a shared hold; deleting the pool (or the image's volume) waits for them all and keeps new
 * ones out until it is done.
 */
export class SharedLock {
  private readonly holders = new Map<string, number>();
  private readonly drained = new Map<string, Array<() => void>>();
  private readonly writers = new Map<string, Promise<void>>();

  async shared<T>(key: string, fn: () => Promise<T>): Promise<T> {
    await this.noWriter(key);
    // No await between the check above and this count: an exclusive taker cannot slip in.
    this.holders.set(key, (this.holders.get(key) ?? 0) + 1);
    try {
      return await fn();
    } finally {
      const left = (this.holders.get(key) ?? 1) - 1;
      if (left > 0) {
        this.holders.set(key, left);
      } else {
        this.holders.delete(key);
        for (const wake of this.drained.get(key) ?? []) wake();
        this.drained.delete(key);
      }
    }
  }

  async exclusive<T>(key: string, fn: () => Promise<T>): Promise<T> {
    await this.noWriter(key);
    let release!: () => void;
    this.writers.set(key, new Promise<void>((r) => (release = r)));
    try {
      if (this.holders.has(key)) {
        await new Promise<void>((wake) => this.drained.set(key, [...(this.drained.get(key) ?? []), wake]));
      }
      return await fn();
    } finally {
      this.writers.delete(key);
      release();
    }
  }

  private async noWriter(key: string): Promise<void> {
    let writer = this.writers.get(key);
    while (writer) {
      await writer;
      writer = this.writers.get(key);
    }
  }
}
