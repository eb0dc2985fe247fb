/**
 * The daemon's own changes in progress: every request other than a read, and every operation while it
 * runs. A kept answer (kernel/http/answer-reuse.ts) may show more than the store (a directory, an
 * interface): none is reused while a change runs, nor after one ended, whatever it touched.
 */
export class ChangeActivity {
  private running = 0;
  /** Bumped when a change begins and when it ends. */
  private epoch = 0;

  /** A change begins; the function returned ends it (once, whatever calls it again). */
  begin(): () => void {
    this.running++;
    this.epoch++;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.running--;
      this.epoch++;
    };
  }

  /** Equal for two moments with no change running at either and none begun between; undefined while one runs. */
  stamp(): number | undefined {
    return this.running === 0 ? this.epoch : undefined;
  }
}
