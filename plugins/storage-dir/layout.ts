/**
 * Where volumes live in a dir pool, as the reference lays it out (the sdk's storage layout): one
 * directory per volume, named `<name>` in the default project and `<project>_<name>` elsewhere;
 * custom volumes are `<project>_<name>` in every project.
 */
import { badRequest, type VolumeRef } from '../../sdk/index.js';

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

/**
 * Directories of corral's own, made when first needed (a pool looks as the reference's until then):
 * upper layers of layered container volumes, and image volumes kept for them after a delete (layers.ts).
 */
export const LAZY_DIRS = ['containers-layers', 'images-retired'];

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
