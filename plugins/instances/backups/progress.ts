/**
 * Progress text for backup operations. lxc prints it after its own label ("Backing up instance:
 * %s", "Importing instance: %s"), so unlike the sdk's progressReporter the text carries none.
 */
import { byteSize } from '../../../sdk/index.js';

export function progressText(bytes: number, startedAt: number, total?: number): string {
  const seconds = Math.max((Date.now() - startedAt) / 1000, 0.001);
  const rate = `${byteSize(bytes / seconds)}/s`;
  if (total && total > 0) return `${Math.min(99, Math.floor((bytes / total) * 100))}% (${rate})`;
  return `${byteSize(bytes)} (${rate})`;
}
