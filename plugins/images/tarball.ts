/** Extracting image tarballs through the host's tar (which runs the decompressor itself). */
import { realpath } from 'node:fs/promises';
import { HostToolError, type HostTools } from '../../sdk/index.js';
import { tarFlags, type Compression } from '../../sdk/lib/archive/index.js';
import { followReads } from './read-position.js';

/** Long enough for multi-GB images; a stuck decompressor still ends. */
export const TAR_TIMEOUT_MS = 30 * 60_000;

const EXTRACT_FLAGS = ['--numeric-owner', '--same-owner', '--same-permissions', '--xattrs', '--xattrs-include=*'];

/**
 * Extract a whole archive into `dir`, keeping numeric ownership, modes and extended attributes.
 * With `onRead`, it hears the bytes of the file read so far (the measure of progress the
 * reference uses), taken from the reading process's file offset: the file never passes through
 * the daemon.
 */
export async function extractTar(tools: HostTools, file: string, compression: Compression, dir: string, onRead?: (bytes: number) => void): Promise<void> {
  const args = ['-x', ...tarFlags(compression), '-f', file, '-C', dir, ...EXTRACT_FLAGS];
  if (!onRead) {
    await tools.run('tar', args, { timeoutMs: TAR_TIMEOUT_MS, endWithDaemon: true });
    return;
  }
  const target = await realpath(file);
  const tar = tools.spawn('tar', args, { endWithDaemon: true });
  tar.stdin.end();
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
  const stopFollowing = followReads(tar.pid, target, onRead);
  try {
    const code = await tar.exited;
    if (timedOut) throw new HostToolError('tar', `tar timed out after ${TAR_TIMEOUT_MS} ms`);
    if (code !== 0) throw new HostToolError('tar', `tar failed (exit ${code}): ${stderr.trim().split('\n').slice(-3).join(' ')}`, code);
  } finally {
    stopFollowing();
    clearTimeout(timer);
  }
}
