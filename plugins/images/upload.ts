/**
 * Receiving an image upload into a staging area while hashing it. The fingerprint is the
 * SHA-256 of the bytes as sent: the one file of a unified image, or the metadata file followed
 * by the rootfs file of a split image.
 */
import { createHash, type Hash } from 'node:crypto';
import { once } from 'node:events';
import { createWriteStream, type WriteStream } from 'node:fs';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { finished, pipeline } from 'node:stream/promises';
import { badRequest, internalError } from '../../sdk/index.js';
import type { MetadataWalk } from './inspect.js';
import { readMultipart } from './multipart.js';
import { WalkAsReceived } from './walk-as-received.js';

export interface StagedUpload {
  fingerprint: string;
  size: number;
  /** The unified tarball, or the metadata tarball of a split image. */
  metadataFile: string;
  /** Split images only. */
  rootfsFile?: string;
  /** Which multipart part carried the rootfs. */
  rootfsPart?: 'rootfs' | 'rootfs.img';
  /** Name the client gave the file (the rootfs part's name for split images, as the reference keeps it). */
  filename: string;
  /** A plain or gzip unified tarball's walk, done as it arrived (see inspectUnified). */
  walked?: MetadataWalk;
}

/**
 * How far the disk may lag behind the network before reading waits. Chunks queued meanwhile go
 * to the kernel in one writev, so a pull costs a few hundred writes instead of one per TLS record.
 */
const WRITE_BEHIND_BYTES = 8 * 1024 * 1024;

/** A staged file written as the bytes arrive, each chunk hashed on its way in. */
class HashedFile {
  size = 0;
  private failure: Error | undefined;

  private constructor(readonly file: string, private readonly out: WriteStream, private readonly hash: Hash) {
    // Kept for the next write or close(): an unheard 'error' would take the daemon down.
    out.on('error', (err) => (this.failure ??= internalError(`Writing the image to its staging file failed: ${err.message}`)));
  }

  static async create(file: string, hash: Hash): Promise<HashedFile> {
    const out = createWriteStream(file, { flags: 'wx', mode: 0o600, highWaterMark: WRITE_BEHIND_BYTES });
    await once(out, 'open');
    return new HashedFile(file, out, hash);
  }

  /** Nothing to wait for unless the disk is WRITE_BEHIND_BYTES behind: then a promise of it catching up. */
  write(chunk: Buffer): Promise<void> | undefined {
    if (this.failure) throw this.failure;
    this.hash.update(chunk);
    this.size += chunk.length;
    if (this.out.write(chunk)) return undefined;
    return this.drained();
  }

  private async drained(): Promise<void> {
    if (!this.out.writableNeedDrain) return;
    // 'close' too: a stream destroyed by an error never drains. The listener that loses goes with `done`.
    const done = new AbortController();
    try {
      await Promise.race([once(this.out, 'drain', { signal: done.signal }), once(this.out, 'close', { signal: done.signal })]);
    } catch {
      // A write error: `failure` holds it.
    } finally {
      done.abort();
    }
    if (this.failure) throw this.failure;
  }

  /** Flush and close; a write that failed on the way fails here. */
  async close(): Promise<void> {
    if (this.out.closed) {
      if (this.failure) throw this.failure;
      return;
    }
    this.out.end();
    await finished(this.out).catch(() => undefined);
    if (this.failure) throw this.failure;
  }

  /** Stop writing and close the file (its staging area is removed by the caller). */
  async abort(): Promise<void> {
    if (this.out.closed) return;
    // Writes still queued fail as the stream goes; those errors are noise beside the reason for aborting.
    const closed = new Promise<void>((resolve) => this.out.once('close', () => resolve()));
    this.out.destroy();
    await closed;
  }

  /** Closed whole, or abandoned when `ok` is false. */
  settle(ok: boolean): Promise<void> {
    return ok ? this.close() : this.abort();
  }
}

const asBuffer = (chunk: unknown): Buffer => (Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string));

/**
 * What a receive reads: the chunks of a request body (iterated, so that a refused upload can
 * still be drained and answered), or a download's stream, which it consumes and may destroy.
 */
export type UploadBody = AsyncIterable<Buffer> | Readable;

export interface ReceiveOptions {
  /** Sees every chunk before it is kept (counting, progress); throwing ends the upload. */
  observe?: (chunk: Buffer) => void;
}

/** Every chunk to `take`, waiting whenever it answers with a promise (the disk being behind). */
async function eachChunk(body: UploadBody, take: (chunk: Buffer) => Promise<void> | undefined): Promise<void> {
  if (body instanceof Readable) {
    // A stream is read through its events, one callback per chunk: cheaper than an async iterator's promises.
    await pipeline(body, new Writable({
      write(chunk: Buffer, _encoding, done) {
        let behind: Promise<void> | undefined;
        try {
          behind = take(chunk);
        } catch (err) {
          done(err as Error);
          return;
        }
        if (behind) behind.then(() => done(), done);
        else done();
      },
    }));
    return;
  }
  for await (const chunk of body) {
    const behind = take(asBuffer(chunk));
    if (behind) await behind;
  }
}

/** The chunks of `body` shown to `observe` first (for readers that iterate). */
async function* observed(body: UploadBody, observe: (chunk: Buffer) => void): AsyncIterable<Buffer> {
  for await (const chunk of body) {
    const bytes = asBuffer(chunk);
    observe(bytes);
    yield bytes;
  }
}

/** A single-file body (application/octet-stream). */
export async function receiveUnified(body: UploadBody, area: string, filename: string, options: ReceiveOptions = {}): Promise<StagedUpload> {
  const hash = createHash('sha256');
  const out = await HashedFile.create(path.join(area, 'image'), hash);
  const walk = new WalkAsReceived();
  const { observe } = options;
  let ok = false;
  try {
    await eachChunk(body, (chunk) => {
      observe?.(chunk);
      const inflating = walk.push(chunk);
      const writing = out.write(chunk);
      return inflating && writing ? Promise.all([inflating, writing]).then(() => undefined) : inflating ?? writing;
    });
    ok = true;
  } finally {
    if (!ok) walk.dispose();
    await out.settle(ok).catch((err) => {
      walk.dispose();
      throw err;
    });
  }
  if (out.size === 0) throw badRequest('The image upload is empty');
  const walked = await walk.result();
  return { fingerprint: hash.digest('hex'), size: out.size, metadataFile: out.file, filename, ...(walked ? { walked } : {}) };
}

/** A multipart body: part `metadata` first, then `rootfs` (or `rootfs.img` for a virtual machine). */
export async function receiveSplit(body: UploadBody, boundary: string, area: string, options: ReceiveOptions = {}): Promise<StagedUpload> {
  const hash = createHash('sha256');
  let meta: HashedFile | undefined;
  let rootfs: HashedFile | undefined;
  let current: HashedFile | undefined;
  let rootfsPart: StagedUpload['rootfsPart'];
  let filename = '';
  let ok = false;
  try {
    await readMultipart(options.observe ? observed(body, options.observe) : body, boundary, {
      async start(part) {
        if (!meta) {
          if (part.name !== 'metadata') throw badRequest(`Invalid multipart image: the first part must be "metadata", not "${part.name}"`);
          current = meta = await HashedFile.create(path.join(area, 'metadata'), hash);
        } else if (!rootfs) {
          if (part.name !== 'rootfs' && part.name !== 'rootfs.img') throw badRequest(`Invalid multipart image: the second part must be "rootfs" or "rootfs.img", not "${part.name}"`);
          rootfsPart = part.name;
          filename = part.filename;
          current = rootfs = await HashedFile.create(path.join(area, 'rootfs'), hash);
        } else {
          throw badRequest('Invalid multipart image: only the "metadata" and "rootfs" parts are expected');
        }
      },
      data: (chunk) => current!.write(chunk),
      async end() {
        current = undefined;
      },
    });
    ok = true;
  } finally {
    const settled = await Promise.allSettled([meta?.settle(ok), rootfs?.settle(ok)]);
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed && ok) throw failed.reason;
  }
  if (!meta || !rootfs) throw badRequest('Invalid multipart image: both the "metadata" and "rootfs" parts are needed');
  if (meta.size === 0 || rootfs.size === 0) throw badRequest('Invalid multipart image: a part is empty');
  return {
    fingerprint: hash.digest('hex'), size: meta.size + rootfs.size,
    metadataFile: meta.file, rootfsFile: rootfs.file, rootfsPart, filename,
  };
}
