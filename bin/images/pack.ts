/**
 * Packs an image tree (metadata.yaml, templates/, rootfs/) into a tarball. Uncompressed tar is read
 * from tar's stdout and compressed here, so the caller can show how far it is.
 */
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import zlib from 'node:zlib';

/** Bytes of tar read so far, of about `total` (the tree's size, so the share can pass 100 a little). */
export type PackProgress = (done: number) => void;

/** gzip -c of `tar -c entries` run in `cwd`, written to `out`. */
export async function packGzip(cwd: string, entries: string[], out: string, onProgress?: PackProgress): Promise<void> {
  const tar = spawn('tar', ['-c', '--numeric-owner', '--xattrs', '-f', '-', '-C', cwd, ...entries], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  tar.stderr.on('data', (c: Buffer) => (stderr += c));
  const exited = new Promise<number | null>((resolve) => tar.on('close', resolve));
  let done = 0;
  const count = new Transform({
    transform(chunk: Buffer, _enc, callback) {
      done += chunk.length;
      onProgress?.(done);
      callback(null, chunk);
    },
  });
  try {
    await pipeline(tar.stdout, count, zlib.createGzip({ level: 6 }), createWriteStream(out));
  } finally {
    const code = await exited;
    if (code !== 0) throw new Error(`tar failed (exit ${code}): ${stderr.trim()}`);
  }
}
