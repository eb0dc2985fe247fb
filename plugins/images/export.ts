/**
 * GET /1.0/images/<fingerprint>/export: the unified tarball as is, or both files of a split
 * image as a multipart/form-data body (parts `metadata` and `rootfs`), as the reference sends them.
 */
import { createReadStream } from 'node:fs';
import { Readable } from 'node:stream';
import { randomHex, raw, type RawResponse } from '../../sdk/index.js';
import { formatExtension } from '../../sdk/lib/archive/index.js';
import type { ImageFiles } from './files.js';
import type { StoredImage } from './image.js';

export function exportResponse(image: StoredImage, files: ImageFiles): RawResponse {
  const fp = image.fingerprint;
  const metaExt = formatExtension(image.files.metadata);
  if (!image.files.rootfs) {
    return raw(createReadStream(files.metadataFile(fp)), 'application/octet-stream', {
      'Content-Disposition': `inline;filename=${fp}${metaExt}`,
      'Content-Length': String(image.size),
    });
  }
  const rootfs = image.files.rootfs;
  const boundary = randomHex(30);
  const partHead = (name: string, filename: string, first: boolean) => Buffer.from(
    `${first ? '' : '\r\n'}--${boundary}\r\nContent-Disposition: form-data; name="${name}"; filename="${filename}"\r\nContent-Type: application/octet-stream\r\n\r\n`,
  );
  const rootfsPart = rootfs.kind === 'qcow2' ? 'rootfs.img' : 'rootfs';
  async function* body() {
    yield partHead('metadata', `meta-${fp}${metaExt}`, true);
    yield* createReadStream(files.metadataFile(fp));
    yield partHead(rootfsPart, `${fp}${formatExtension(rootfs)}`, false);
    yield* createReadStream(files.rootfsFile(fp));
    yield Buffer.from(`\r\n--${boundary}--\r\n`);
  }
  return raw(Readable.from(body(), { objectMode: false }), `multipart/form-data; boundary=${boundary}`);
}
