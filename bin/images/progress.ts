/**
 * Progress of an image command on stderr-free stdout: one line per step; percentages rewrite their
 * line on a terminal and are printed every 25 % otherwise, so logs stay short.
 */
export class Progress {
  private started = Date.now();
  private open = false;
  private lastShown = new Map<string, number>();

  constructor(private readonly out: NodeJS.WriteStream = process.stdout) {}

  private get tty(): boolean {
    return Boolean(this.out.isTTY);
  }

  private closeLine(): void {
    if (this.open) this.out.write('\n');
    this.open = false;
  }

  step(text: string): void {
    this.closeLine();
    this.out.write(`${text}\n`);
  }

  /** `label: N%` for `done` of `total` (total 0: only the amount done). */
  percent(label: string, done: number, total: number): void {
    const share = total > 0 ? Math.min(100, Math.floor((done / total) * 100)) : -1;
    const text = share >= 0 ? `${label}: ${share}% (${megabytes(done)})` : `${label}: ${megabytes(done)}`;
    if (this.tty) {
      this.out.write(`\r${text}\x1b[K`);
      this.open = true;
      return;
    }
    const bucket = share >= 0 ? Math.floor(share / 25) : Math.floor(done / (64 << 20));
    if (this.lastShown.get(label) === bucket) return;
    this.lastShown.set(label, bucket);
    this.out.write(`${text}\n`);
  }

  /** `label: N` for a count with no known end; every 25 off a terminal. */
  count(label: string, n: number): void {
    const text = `${label}: ${n}`;
    if (this.tty) {
      this.out.write(`\r${text}\x1b[K`);
      this.open = true;
    } else if (n === 1 || n % 25 === 0) {
      this.out.write(`${text}\n`);
    }
  }

  /** Seconds since the command started, for the closing line. */
  elapsed(): string {
    return `${((Date.now() - this.started) / 1000).toFixed(1)} s`;
  }

  end(text: string): void {
    this.step(text);
  }
}

export const megabytes = (bytes: number) => `${(bytes / 1048576).toFixed(1)} MiB`;
