/** Extracting image tarballs through the host's tar (which runs the decompressor itself). */
import { createReadStream } from 'node:fs';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { HostToolError, type HostTools } from '../../sdk/index.js';
import { tarFlags, type Compression } from '../../sdk/lib/archive/index.js';

/** Long enough for multi-GB images; a stuck decompressor still ends. */
export const TAR_TIMEOUT_MS = 30 * 60_000;

/** Reads big enough to cost little, small enough that the first percent shows early. */
const CHUNK = 256 << 10;

const EXTRACT_FLAGS = ['--numeric-owner', '--same-owner', '--same-permissions', '--xattrs', '--xattrs-include=*'];

/**
 * Extract a whole archive into `dir`, keeping numeric ownership, modes and extended attributes.
 * With `onRead`, the file is fed to tar through a pipe that counts the compressed bytes read (the
 * measure of progress the reference uses); without it tar reads the file itself.
 */
export async function extractTar(tools: HostTools, file: string, compression: Compression, dir: string, onRead?: (bytes: number) => void): Promise<void> {
  if (!onRead) {
    await tools.run('tar', ['-x', ...tarFlags(compression), '-f', file, '-C', dir, ...EXTRACT_FLAGS], { timeoutMs: TAR_TIMEOUT_MS, endWithDaemon: true });
    return;
  }
  const tar = tools.spawn('tar', ['-x', ...tarFlags(compression), '-f', '-', '-C', dir, ...EXTRACT_FLAGS], { endWithDaemon: true });
  tar.stdout.resume();
  let stderr = '';
  tar.stderr?.on('data', (c: Buffer) => {
    if (stderr.length < 16 * 1024) stderr += c.toString('utf8');
  });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    tar.kill('SIGKILL');
  }, TAR_TIMEOUT_MS);
  const counter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      onRead(chunk.length);
      done(null, chunk);
    },
  });
  const source = createReadStream(file, { highWaterMark: CHUNK });
  let readError: Error | undefined;
  source.on('error', (err) => (readError = err));
  try {
    // tar's exit says whether the archive was good. It may stop reading at the end-of-archive
    // blocks and leave padding unread: the pipe it closed is then no failure; a file we could not read is.
    await Promise.allSettled([pipeline(source, counter, tar.stdin), tar.exited]);
    const code = await tar.exited;
    if (timedOut) throw new HostToolError('tar', `tar timed out after ${TAR_TIMEOUT_MS} ms`);
    if (readError) throw new HostToolError('tar', `Reading ${file} failed: ${readError.message}`);
    if (code !== 0) throw new HostToolError('tar', `tar failed (exit ${code}): ${stderr.trim().split('\n').slice(-3).join(' ')}`, code);
  } finally {
    clearTimeout(timer);
  }
}
