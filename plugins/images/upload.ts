/**
 * Receiving an image upload into a staging area while hashing it. The fingerprint is the
 * SHA-256 of the bytes as sent: the one file of a unified image, or the metadata file followed
 * by the rootfs file of a split image.
 */
import { createHash, type Hash } from 'node:crypto';
import { open, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { badRequest } from '../../sdk/index.js';
import { readMultipart } from './multipart.js';

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
}

class HashedFile {
  size = 0;
  private constructor(readonly file: string, private readonly fh: FileHandle, private readonly hash: Hash) {}

  static async create(file: string, hash: Hash): Promise<HashedFile> {
    return new HashedFile(file, await open(file, 'wx', 0o600), hash);
  }

  async write(chunk: Buffer): Promise<void> {
    this.hash.update(chunk);
    this.size += chunk.length;
    await this.fh.write(chunk);
  }

  close(): Promise<void> {
    return this.fh.close();
  }
}

const asBuffer = (chunk: unknown): Buffer => (Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string));

/** A single-file body (application/octet-stream). */
export async function receiveUnified(body: AsyncIterable<Buffer>, area: string, filename: string): Promise<StagedUpload> {
  const hash = createHash('sha256');
  const out = await HashedFile.create(path.join(area, 'image'), hash);
  try {
    for await (const chunk of body) await out.write(asBuffer(chunk));
  } finally {
    await out.close();
  }
  if (out.size === 0) throw badRequest('The image upload is empty');
  return { fingerprint: hash.digest('hex'), size: out.size, metadataFile: out.file, filename };
}

/** A multipart body: part `metadata` first, then `rootfs` (or `rootfs.img` for a virtual machine). */
export async function receiveSplit(body: AsyncIterable<Buffer>, boundary: string, area: string): Promise<StagedUpload> {
  const hash = createHash('sha256');
  let meta: HashedFile | undefined;
  let rootfs: HashedFile | undefined;
  let current: HashedFile | undefined;
  let rootfsPart: StagedUpload['rootfsPart'];
  let filename = '';
  try {
    await readMultipart(body, boundary, {
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
  } finally {
    await meta?.close();
    await rootfs?.close();
  }
  if (!meta || !rootfs) throw badRequest('Invalid multipart image: both the "metadata" and "rootfs" parts are needed');
  if (meta.size === 0 || rootfs.size === 0) throw badRequest('Invalid multipart image: a part is empty');
  return {
    fingerprint: hash.digest('hex'), size: meta.size + rootfs.size,
    metadataFile: meta.file, rootfsFile: rootfs.file, rootfsPart, filename,
  };
}
