/** Extracting image tarballs through the host's tar (which runs the decompressor itself). */
import type { HostTools } from '../../sdk/index.js';
import { tarFlags, type Compression } from '../../sdk/lib/archive/index.js';

/** Long enough for multi-GB images; a stuck decompressor still ends. */
export const TAR_TIMEOUT_MS = 30 * 60_000;

/** Extract a whole archive into `dir`, keeping numeric ownership, modes and extended attributes. */
export async function extractTar(tools: HostTools, file: string, compression: Compression, dir: string): Promise<void> {
  await tools.run('tar', [
    '-x', ...tarFlags(compression), '-f', file, '-C', dir,
    '--numeric-owner', '--same-owner', '--same-permissions', '--xattrs', '--xattrs-include=*',
  ], { timeoutMs: TAR_TIMEOUT_MS, endWithDaemon: true });
}
