/**
 * The decompressed bytes of an image file: gzip in-process (zlib), the other formats through the
 * host's decompressor, whose failure (damaged data, missing tool) is the client's 400.
 */
import { createReadStream } from 'node:fs';
import { pipeline } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { badRequest, isApiError, type HostTools } from '../../sdk/index.js';
import type { Compression } from '../../sdk/lib/archive/index.js';
import { TAR_TIMEOUT_MS } from './tarball.js';

const DECOMPRESSORS: Record<Exclude<Compression, 'gzip' | 'none'>, [string, string[]]> = {
  bzip2: ['bzip2', ['-d', '-c']],
  xz: ['xz', ['-d', '-c']],
  lzma: ['xz', ['--format=lzma', '-d', '-c']],
  zstd: ['zstd', ['-d', '-c', '-q']],
  lz4: ['lz4', ['-d', '-c', '-q']],
};

/** Large reads and outputs: zlib's default 16 KiB chunks triple the cost through stream overhead. */
const READ_CHUNK = 1024 * 1024;
const INFLATE_CHUNK = 256 * 1024;

const invalid = (why: string) => badRequest(`Invalid image tarball: ${why}`);

/** Feed the decompressed content of `file` to `sink`, chunk by chunk. */
export async function readDecompressed(tools: HostTools, file: string, compression: Compression, sink: (chunk: Buffer) => void): Promise<void> {
  if (compression === 'none' || compression === 'gzip') {
    const raw = createReadStream(file, { highWaterMark: READ_CHUNK });
    // pipeline carries a read error into the inflater, where the loop below sees it.
    const stream = compression === 'gzip' ? pipeline(raw, createGunzip({ chunkSize: INFLATE_CHUNK }), () => {}) : raw;
    try {
      for await (const chunk of stream) sink(chunk as Buffer);
    } catch (err) {
      if (isApiError(err)) throw err;
      throw invalid(`gzip: ${(err as Error).message}`);
    } finally {
      raw.destroy();
    }
    return;
  }
  const [command, args] = DECOMPRESSORS[compression];
  const proc = tools.spawn(command, [...args, file]);
  proc.stdin.end();
  let stderr = '';
  proc.stderr?.on('data', (c: Buffer) => {
    if (stderr.length < 4096) stderr += c.toString();
  });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    proc.kill('SIGKILL');
  }, TAR_TIMEOUT_MS);
  try {
    for await (const chunk of proc.stdout) sink(chunk as Buffer);
  } catch (err) {
    // A sink that refused the content stops the decompressor too.
    proc.kill('SIGKILL');
    throw err;
  } finally {
    clearTimeout(timer);
  }
  const code = await proc.exited;
  if (timedOut) throw invalid(`${command} took too long`);
  if (code === 127) throw badRequest(`${compression} images need "${command}" on this host, and it is not installed`);
  if (code !== 0) {
    // Name the problem, not the staging path the decompressor was given.
    const line = (stderr.trim().split('\n')[0] ?? '').replaceAll(`${file}: `, '');
    throw invalid(line ? (line.startsWith(`${command}:`) ? line : `${command}: ${line}`) : `${command} exited with status ${code}`);
  }
}
