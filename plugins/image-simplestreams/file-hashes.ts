/**
 * sha256 of the separate files of split images, which simplestreams lists item by item (a unified
 * tarball's sum is its fingerprint already). Image files never change under a fingerprint, so each
 * sum is read once per daemon run; concurrent index requests share one reading.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';

export class FileHashes {
  private readonly sums = new Map<string, Promise<string>>();

  /** `key` names the file for good (fingerprint and role); `path` is where it lies now. */
  sha256(key: string, path: string): Promise<string> {
    let sum = this.sums.get(key);
    if (!sum) {
      sum = hashFile(path);
      this.sums.set(key, sum);
      // A failed read (the image deleted meanwhile) is not remembered.
      sum.catch(() => this.sums.delete(key));
    }
    return sum;
  }

  /** Drop sums of images no longer served, so the map follows the catalog. */
  keepOnly(fingerprints: Set<string>): void {
    for (const key of this.sums.keys()) if (!fingerprints.has(key.split(':', 1)[0]!)) this.sums.delete(key);
  }
}

async function hashFile(path: string): Promise<string> {
  const hash = createHash('sha256');
  await pipeline(createReadStream(path), hash);
  return hash.digest('hex');
}
