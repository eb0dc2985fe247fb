/**
 * Where volumes live in a dir pool, as the reference lays it out: one directory per volume type
 * under the pool's source, and one directory per volume, named `<name>` in the default project
 * and `<project>_<name>` elsewhere (project names cannot contain `_`); custom volumes are
 * `<project>_<name>` in every project.
 */
import path from 'node:path';
import { badRequest, type VolumeRef, type VolumeType } from '../../sdk/index.js';

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

/** Every directory a pool holds, with the reference's modes (instance trees must be traversable). */
export const LAYOUT: { dir: string; mode: number }[] = [
  { dir: 'containers', mode: 0o711 },
  { dir: 'containers-snapshots', mode: 0o711 },
  // Custom volumes are mounted into unprivileged containers: their user namespace must traverse this.
  { dir: 'custom', mode: 0o711 },
  { dir: 'custom-snapshots', mode: 0o700 },
  { dir: 'images', mode: 0o700 },
  { dir: 'virtual-machines', mode: 0o700 },
  { dir: 'virtual-machines-snapshots', mode: 0o700 },
];

/** Volume directories themselves: the instance driver maps ids at mount time and needs to pass. */
export const VOLUME_MODE = 0o711;

export function checkVolumeName(name: string): void {
  if (!name || name === '.' || name === '..' || name.includes('/') || name.includes('\0')) {
    throw badRequest(`Invalid volume name "${name}"`);
  }
}

export function volumeDirName(vol: VolumeRef): string {
  checkVolumeName(vol.name);
  // Image volumes are shared by every project; custom volumes always carry their project, as the reference lays them out.
  if (vol.type === 'image' || (vol.project === 'default' && vol.type !== 'custom')) return vol.name;
  checkVolumeName(vol.project);
  return `${vol.project}_${vol.name}`;
}

export function volumeFromDirName(type: VolumeType, entry: string): VolumeRef {
  const cut = entry.indexOf('_');
  if (type === 'image' || cut <= 0) return { type, project: 'default', name: entry };
  return { type, project: entry.slice(0, cut), name: entry.slice(cut + 1) };
}

export const typeDir = (source: string, type: VolumeType) => path.join(source, TYPE_DIRS[type]);
