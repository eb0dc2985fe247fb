/**
 * Walking a plain (uncompressed) image tarball while it arrives, so that checking it afterwards
 * (inspect.ts) need not read the whole file a second time. Only a shortcut: whatever this walk
 * cannot vouch for (another format, a fault anywhere) is left to the usual walk over the file,
 * which then refuses the upload with its own words.
 */
import { MetadataWalk } from './inspect.js';

/** A plain tar carries "ustar" at offset 257 of its first header (see detectFormat). */
const USTAR = Buffer.from('ustar');
const USTAR_AT = 257;

export class WalkAsReceived {
  private head: Buffer[] = [];
  private headBytes = 0;
  private walk: MetadataWalk | undefined;
  private abandoned = false;

  push(chunk: Buffer): void {
    if (this.abandoned) return;
    try {
      if (this.walk) {
        this.walk.walker.push(chunk);
        return;
      }
      this.head.push(chunk);
      this.headBytes += chunk.length;
      if (this.headBytes < USTAR_AT + USTAR.length) return;
      const head = Buffer.concat(this.head);
      this.head = [];
      if (!head.subarray(USTAR_AT, USTAR_AT + USTAR.length).equals(USTAR)) {
        this.abandoned = true;
        return;
      }
      this.walk = new MetadataWalk();
      this.walk.walker.push(head);
    } catch {
      this.abandon();
    }
  }

  /** The walk of the whole upload, when it read as a plain tarball through to its end. */
  result(): MetadataWalk | undefined {
    if (this.abandoned || !this.walk) return undefined;
    try {
      this.walk.walker.finish();
      return this.walk;
    } catch {
      return undefined;
    }
  }

  private abandon(): void {
    this.abandoned = true;
    this.walk = undefined;
    this.head = [];
  }
}
