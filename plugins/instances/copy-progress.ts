/**
 * `fs_progress` for copies and moves: the copy runs in a host tool that reports nothing, so the
 * growth of the target file system's used space stands in for bytes copied. Cheap (a statfs every
 * quarter second; the reporter passes on one a second) and close enough for a progress line; never negative.
 */
import { statfs } from 'node:fs/promises';
import { type OperationControl } from '../../sdk/index.js';
import { progressReporter } from '../../sdk/lib/operations/index.js';

const TICK_MS = 250;

async function usedBytes(dir: string): Promise<number | undefined> {
  const fs = await statfs(dir).catch(() => undefined);
  return fs ? (fs.blocks - fs.bfree) * fs.bsize : undefined;
}

/** Report growth under `dir` as `fs_progress` until the returned function is called. */
export async function watchCopyProgress(op: OperationControl, dir: string): Promise<() => void> {
  const start = await usedBytes(dir);
  if (start === undefined) return () => {};
  const reporter = progressReporter(op, 'fs', 'rootfs', 0);
  const timer = setInterval(() => {
    void usedBytes(dir).then((now) => {
      if (now !== undefined) reporter.update(Math.max(0, now - start));
    });
  }, TICK_MS);
  return () => {
    clearInterval(timer);
    reporter.clear();
  };
}
