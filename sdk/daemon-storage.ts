/**
 * Where the daemon keeps its own files of a kind (image files, backup tarballs): `<dataDir>/<kind>`,
 * or a custom volume named by the server key `storage.<kind>_volume` (`<pool>/<volume>`, extension
 * `daemon_storage`). The storage family host provides the service and moves the files when the key
 * changes; images and backups ask it for their base directory on every use instead of computing
 * it once, so a move takes effect without a restart.
 */
import path from 'node:path';
import { createServiceRef, type ServiceRegistry } from './services.js';

export type DaemonStorageKind = 'images' | 'backups';

export const DAEMON_STORAGE_KINDS: readonly DaemonStorageKind[] = ['images', 'backups'];

/** The server key naming the volume of a kind. */
export const daemonStorageKey = (kind: DaemonStorageKind) => `storage.${kind}_volume`;

export interface DaemonStorageService {
  /**
   * Host directory holding the files of `kind`. Throws (500) when the configured volume is
   * unavailable (its pool failed to mount at start), rather than writing to the data dir.
   */
  dir(kind: DaemonStorageKind): string;
}

export const DaemonStorageServiceRef = createServiceRef<DaemonStorageService>('daemon-storage');

/** The base directory of `kind`: the service's answer, or `<dataDir>/<kind>` in a build without the storage family. */
export function daemonStorageDir(ctx: { services: ServiceRegistry; dataDir: string }, kind: DaemonStorageKind): string {
  const service = ctx.services.get(DaemonStorageServiceRef);
  return service ? service.dir(kind) : path.join(ctx.dataDir, kind);
}

/** Whether the files of `kind` can be reached now (boot cleanups skip a kind whose volume is unavailable). */
export function daemonStorageAvailable(ctx: { services: ServiceRegistry; dataDir: string }, kind: DaemonStorageKind): boolean {
  try {
    daemonStorageDir(ctx, kind);
    return true;
  } catch {
    return false;
  }
}
