/**
 * The reference's on-disk layout of a storage pool, shared by the drivers that keep volumes as
 * directories or subvolumes: one directory per volume type under the pool root, snapshots under
 * `<type>-snapshots/<volume>/<snapshot>`, and volume directories named `<project>_<name>` outside
 * the default project (project names cannot contain `_`). How a driver names a volume's directory
 * (and which names it refuses) stays the driver's own.
 */
import { lstat, rename } from 'node:fs/promises';
import path from 'node:path';
import { conflict, notFound } from '../../errors.js';
import type { PoolInfo, VolumeRef, VolumeType } from '../../storage.js';

export const TYPE_DIRS: Record<VolumeType, string> = {
  container: 'containers',
  'virtual-machine': 'virtual-machines',
  image: 'images',
  custom: 'custom',
};

/** Where each volume type keeps its snapshots (image volumes have none). */
export const SNAPSHOT_DIRS: Partial<Record<VolumeType, string>> = {
  container: 'containers-snapshots',
  'virtual-machine': 'virtual-machines-snapshots',
  custom: 'custom-snapshots',
};

/** Volume directories themselves: the instance driver maps ids at mount time and needs to pass. */
export const VOLUME_MODE = 0o711;

/**
 * A container snapshot holds the setuid binaries of its instance: only root passes (0100, as the
 * reference keeps it). A snapshot copied from its instance keeps the instance directory's mode
 * and owner instead (the container's root owns it, also 0100).
 */
export const CONTAINER_SNAPSHOT_MODE = 0o100;

/** The mode a snapshot filled from elsewhere (a backup, a migration) ends with. */
export const filledSnapshotMode = (type: VolumeType) => (type === 'container' ? CONTAINER_SNAPSHOT_MODE : VOLUME_MODE);

export const typeDir = (root: string, type: VolumeType) => path.join(root, TYPE_DIRS[type]);

/** The volume a directory under typeDir(type) holds: `<project>_<name>`, or a bare name in the default project (images always). */
export function volumeFromDirName(type: VolumeType, entry: string): VolumeRef {
  const cut = entry.indexOf('_');
  if (type === 'image' || cut <= 0) return { type, project: 'default', name: entry };
  return { type, project: entry.slice(0, cut), name: entry.slice(cut + 1) };
}

/**
 * Rename a volume's directory from `from` to `to` (paths the driver computed), then let its
 * snapshots follow; when they cannot, the volume goes back to its old name.
 */
export async function renameVolumeDir(
  pool: PoolInfo, vol: VolumeRef, newName: string, from: string, to: string, moveSnapshots: () => Promise<void>,
): Promise<void> {
  if (await lstat(to).then(() => true, () => false)) throw conflict(`Volume "${newName}" already exists on storage pool "${pool.name}"`);
  try {
    await rename(from, to);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw notFound(`Volume "${vol.name}" not found on storage pool "${pool.name}"`);
    throw err;
  }
  try {
    await moveSnapshots();
  } catch (err) {
    await rename(to, from).catch(() => {});
    throw err;
  }
}
