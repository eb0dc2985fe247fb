/** Replacing a file whole in a host directory of the instance volume (metadata.yaml, templates). */
import { constants as C } from 'node:fs';
import { open, rename, unlink } from 'node:fs/promises';
import path from 'node:path';
import { badRequest, randomHex } from '../../../sdk/index.js';

/** Replace a file in `dir` by write-to-temp and rename, so readers see the old or the new file whole. */
export async function replaceFile(dir: string, name: string, data: Buffer | string | AsyncIterable<Buffer>, maxBytes = Infinity): Promise<void> {
  const tmp = path.join(dir, `.${name}.${randomHex(6)}.tmp`);
  const fh = await open(tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o644);
  try {
    try {
      const put = async (buf: Buffer) => {
        for (let off = 0; off < buf.length;) off += (await fh.write(buf, off, buf.length - off)).bytesWritten;
      };
      if (typeof data === 'string' || Buffer.isBuffer(data)) {
        await put(Buffer.from(data));
      } else {
        let size = 0;
        for await (const chunk of data) {
          const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string);
          size += buf.length;
          if (size > maxBytes) throw badRequest(`The file is larger than ${maxBytes} bytes`);
          await put(buf);
        }
      }
      await fh.chmod(0o644);
      await fh.sync();
    } finally {
      await fh.close();
    }
    // rename replaces a symlink at `name` itself, never what it points to.
    await rename(tmp, path.join(dir, name));
  } catch (err) {
    await unlink(tmp).catch(() => {});
    throw err;
  }
}
