/**
 * Where volumes live in a btrfs pool: the reference's layout (the sdk's storage layout), one
 * subvolume per volume named `<name>` in the default project and `<project>_<name>` elsewhere,
 * snapshots under `<type>-snapshots/<volume>/<snapshot>`. Names starting with one dot are this
 * driver's scratch entries (volume and snapshot names cannot start with one here); names starting
 * with two are the storage family's own scratch volumes (`..partial-<name>`), kept and listed.
 */
import path from 'node:path';
import { badRequest, notFound, type VolumeRef, type VolumeType } from '../../sdk/index.js';
import { SNAPSHOT_DIRS } from '../../sdk/lib/storage/index.js';

/** Plain directories of the pool root, with the reference's modes (instance trees must be traversable). */
export const LAYOUT: { dir: string; mode: number }[] = [
  { dir: 'containers', mode: 0o711 },
  { dir: 'containers-snapshots', mode: 0o711 },
  { dir: 'custom', mode: 0o700 },
  { dir: 'custom-snapshots', mode: 0o700 },
  { dir: 'images', mode: 0o700 },
  { dir: 'virtual-machines', mode: 0o700 },
  { dir: 'virtual-machines-snapshots', mode: 0o700 },
];

/** Scratch prefixes: a volume being filled, a snapshot being filled, a restore's or refresh's halves. */
export const BUILDING = '.building-';
export const RESTORE_NEW = '.restore-new-';
export const RESTORE_OLD = '.restore-old-';
/** Per-operation scratch directories under the pool root (send and receive). */
export const SCRATCH_DIR = '.scratch';

/** An entry of this driver's own (a scratch subvolume or directory), never a volume or snapshot. */
export const isDriverScratch = (entry: string) => entry.startsWith('.') && !entry.startsWith('..');

export function checkName(name: string, what = 'volume'): void {
  if (!name || name === '..' || isDriverScratch(name) || name.includes('/') || name.includes('\0')) throw badRequest(`Invalid ${what} name "${name}"`);
}

export function volumeDirName(vol: VolumeRef): string {
  // Image volumes are shared by every project; their scratch names (`<fp>.unpacking`) are the family's.
  if (vol.type === 'image') {
    if (!vol.name || vol.name.includes('/') || vol.name.startsWith('.')) throw badRequest(`Invalid volume name "${vol.name}"`);
    return vol.name;
  }
  checkName(vol.name);
  if (vol.project === 'default') return vol.name;
  checkName(vol.project, 'project');
  return `${vol.project}_${vol.name}`;
}

export function snapshotRoot(root: string, type: VolumeType): string {
  const dir = SNAPSHOT_DIRS[type];
  if (!dir) throw notFound(`Volumes of type "${type}" have no snapshots`);
  return path.join(root, dir);
}
