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

/** The two keys a progress report sets: the client's line and the numbers (as strings). */
function progressKeys(stage: string, label: string, done: number, percent: number, speed: number): Record<string, unknown> {
  const numbers: Record<string, string> = { stage, speed: String(speed) };
  if (percent > 0) numbers.percent = String(percent);
  else if (done > 0) numbers.processed = String(done);
  const text = percent > 0 ? `${label}: ${percent}% (${byteSize(speed)}/s)` : `${label}: ${byteSize(done)} (${byteSize(speed)}/s)`;
  return { [`${stage}_progress`]: text, progress: numbers };
}

/** Average bytes a second since `started` (never a division by zero). */
const averageSpeed = (done: number, started: number, now: number) => Math.round(done / (Math.max(1, now - started) / 1000));

/** `total` is an estimate: the percentage stops at 99 until the stage is over. */
export function progressReporter(op: OperationControl, stage: string, label: string, total: number): ProgressReporter {
  const started = Date.now();
  let last = 0;
  return {
    update(done) {
      const now = Date.now();
      if (now - last < INTERVAL_MS) return;
      last = now;
      const percent = total > 0 ? Math.min(99, Math.floor((done * 100) / total)) : 0;
      op.updateMetadata(progressKeys(stage, label, done, percent, averageSpeed(done, started, now)));
    },
    clear() {
      // Metadata is merged: undefined values drop out of the JSON the operation is shown as.
      op.updateMetadata({ [`${stage}_progress`]: undefined, progress: undefined });
    },
  };
}

/** Bytes of a known total done so far; `done >= total` is the end of the stage. */
export type ByteProgress = (done: number, total: number) => void;

/** The shortest time between two reports of a percentage stage: a few a second at most. */
export const PERCENT_INTERVAL_MS = 250;

/**
 * A stage whose total is known (the image files an unpack reads): a report when the percentage
 * moves, at most one per `intervalMs`, and always the last one (100%), which stays in the metadata
 * as the reference leaves it. The percentage counts a started percent as the reference does (the
 * first report says 1%).
 */
export function percentReporter(op: OperationControl, stage: string, label: string, intervalMs = PERCENT_INTERVAL_MS): ByteProgress {
  // The speed is an average since the stage was asked for, as a first burst of reads would overstate it.
  const started = Date.now();
  let last = -Infinity;
  let shown = 0;
  return (done, total) => {
    const now = Date.now();
    if (total <= 0 || done <= 0) return;
    const finished = done >= total;
    const percent = finished ? 100 : Math.min(99, Math.floor((done * 100) / total) + 1);
    if (shown === 100 || (!finished && (percent === shown || now - last < intervalMs))) return;
    last = now;
    shown = percent;
    op.updateMetadata(progressKeys(stage, label, 0, percent, averageSpeed(done, started, now)));
  };
}
