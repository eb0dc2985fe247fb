/**
 * Operation progress as the reference reports it: `<stage>_progress` holds a line for the command
 * line client, `progress` the numbers (as strings) for API callers.
 */
import type { OperationControl } from '../../operations.js';

const UNITS = ['kB', 'MB', 'GB', 'TB', 'PB', 'EB'];

/** Decimal units with two decimals (`7.53MB`), bytes below a kilobyte (`512B`). */
export function byteSize(bytes: number): string {
  if (bytes < 1000) return `${Math.max(0, Math.round(bytes))}B`;
  let value = bytes;
  let unit = -1;
  while (value >= 1000 && unit < UNITS.length - 1) {
    value /= 1000;
    unit++;
  }
  return `${value.toFixed(2)}${UNITS[unit]}`;
}

export interface ProgressReporter {
  /** Bytes done so far; the first call is reported, then at most one a second. */
  update(done: number): void;
  /** Drop the progress keys (the stage is over). */
  clear(): void;
}

const INTERVAL_MS = 1000;

/** `total` is an estimate: the percentage stops at 99 until the stage is over. */
export function progressReporter(op: OperationControl, stage: string, label: string, total: number): ProgressReporter {
  const started = Date.now();
  let last = 0;
  return {
    update(done) {
      const now = Date.now();
      if (now - last < INTERVAL_MS) return;
      last = now;
      const speed = Math.round(done / (Math.max(1, now - started) / 1000));
      const percent = total > 0 ? Math.min(99, Math.floor((done * 100) / total)) : 0;
      const numbers: Record<string, string> = { stage, speed: String(speed) };
      if (done > 0) numbers.processed = String(done);
      if (percent > 0) numbers.percent = String(percent);
      const text = percent > 0 ? `${label}: ${percent}% (${byteSize(speed)}/s)` : `${label}: ${byteSize(done)} (${byteSize(speed)}/s)`;
      op.updateMetadata({ [`${stage}_progress`]: text, progress: numbers });
    },
    clear() {
      // Metadata is merged: undefined values drop out of the JSON the operation is shown as.
      op.updateMetadata({ [`${stage}_progress`]: undefined, progress: undefined });
    },
  };
}
