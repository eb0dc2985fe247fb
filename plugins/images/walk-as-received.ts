/**
 * Walking an image tarball while it arrives — plain, or gzip (inflated by zlib beside the
 * download, on its thread pool) — so that checking it afterwards (inspect.ts) need not read the
 * whole file a second time. Only a shortcut: whatever this walk cannot vouch for (another format,
 * a fault anywhere) is left to the usual walk over the file, which then refuses the upload with
 * its own words.
 */
import { once } from 'node:events';
import { createGunzip, type Gunzip, type ZlibOptions } from 'node:zlib';
import { MetadataWalk } from './inspect.js';

/** A plain tar carries "ustar" at offset 257 of its first header; gzip starts with 1f 8b (see detectFormat). */
const USTAR = Buffer.from('ustar');
const USTAR_AT = 257;
const HEAD_BYTES = USTAR_AT + USTAR.length;
const isGzip = (head: Buffer) => head[0] === 0x1f && head[1] === 0x8b;
/** As readDecompressed inflates: large outputs, few events. */
const INFLATE_CHUNK = 256 * 1024;
/** How far the download may run ahead of the inflater before it waits (memory per upload). */
const INFLATE_AHEAD = 4 * 1024 * 1024;

export class WalkAsReceived {
  private head: Buffer[] = [];
  private headBytes = 0;
  private walk: MetadataWalk | undefined;
  private gunzip: Gunzip | undefined;
  private inflated: Promise<unknown> | undefined;
  private abandoned = false;

  /** A promise only when the inflater is behind and the reading should wait for it. */
  push(chunk: Buffer): Promise<void> | undefined {
    if (this.abandoned) return undefined;
    try {
      if (this.gunzip) return this.gunzip.write(chunk) ? undefined : this.inflaterDrained();
      if (this.walk) {
        this.walk.walker.push(chunk);
        return undefined;
      }
      this.head.push(chunk);
      this.headBytes += chunk.length;
      if (this.headBytes < HEAD_BYTES) return undefined;
      const head = Buffer.concat(this.head);
      this.head = [];
      if (isGzip(head)) return this.startInflating(head);
      if (!head.subarray(USTAR_AT, HEAD_BYTES).equals(USTAR)) {
        this.abandoned = true;
        return undefined;
      }
      this.walk = new MetadataWalk('none');
      this.walk.walker.push(head);
    } catch {
      this.abandon();
    }
    return undefined;
  }

  /** The walk of the whole upload, when it read as a plain or gzip tarball through to its end. */
  async result(): Promise<MetadataWalk | undefined> {
    if (this.gunzip && !this.abandoned) {
      this.gunzip.end();
      await this.inflated;
    }
    if (this.abandoned || !this.walk) return undefined;
    try {
      this.walk.walker.finish();
      return this.walk;
    } catch {
      return undefined;
    }
  }

  /** The upload failed: stop inflating. */
  dispose(): void {
    this.abandon();
  }

  private startInflating(head: Buffer): Promise<void> | undefined {
    const walk = this.walk = new MetadataWalk('gzip');
    // Zlib streams take the stream options too: let the download run a few MB ahead of the inflater.
    const gunzip = this.gunzip = createGunzip({ chunkSize: INFLATE_CHUNK, writableHighWaterMark: INFLATE_AHEAD } as ZlibOptions);
    gunzip.on('data', (data: Buffer) => {
      if (this.abandoned) return;
      try {
        walk.walker.push(data);
      } catch {
        this.abandon();
      }
    });
    // Settles however the inflater ends: finished, damaged data (left to the file walk) or stopped.
    this.inflated = new Promise((resolve) => {
      gunzip.once('end', resolve);
      gunzip.once('close', resolve);
      gunzip.on('error', () => {
        this.abandon();
        resolve(undefined);
      });
    });
    return gunzip.write(head) ? undefined : this.inflaterDrained();
  }

  private async inflaterDrained(): Promise<void> {
    await Promise.race([once(this.gunzip!, 'drain').catch(() => undefined), this.inflated]);
  }

  private abandon(): void {
    this.abandoned = true;
    this.walk = undefined;
    this.head = [];
    this.gunzip?.destroy();
  }
}
