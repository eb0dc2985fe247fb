/**
 * Where an instance's parts sit in a backup archive, by instance type, as the reference lays them
 * out: a container's volume under `backup/container/` and each snapshot's under
 * `backup/snapshots/<name>/`; a virtual machine's config files (metadata.yaml, templates/) under
 * `backup/virtual-machine/` and `backup/virtual-machine-snapshots/<name>/`, with each raw disk
 * beside its directory as `<member>.img`.
 */
import { BLOCK_IMAGE, type InstanceType } from '../../../sdk/index.js';
import type { BackupTarballPart } from '../../../sdk/lib/backup/index.js';

export interface InstanceBackupLayout {
  /** Member of the instance's own part (`backup/container`). */
  main: string;
  /** Directory of the snapshots' parts (`backup/snapshots`). */
  snapshots: string;
  /** The disk image file of the volume, archived as `<member>.img` (virtual machines). */
  disk?: string;
}

const CONTAINER: InstanceBackupLayout = { main: 'backup/container', snapshots: 'backup/snapshots' };
const VIRTUAL_MACHINE: InstanceBackupLayout = { main: 'backup/virtual-machine', snapshots: 'backup/virtual-machine-snapshots', disk: BLOCK_IMAGE };

export const backupLayout = (type: InstanceType): InstanceBackupLayout => (type === 'virtual-machine' ? VIRTUAL_MACHINE : CONTAINER);

/** The tarball parts of one volume (the instance's or a snapshot's) at `member`. */
export function volumeParts(layout: InstanceBackupLayout, member: string, dir: string, backupYaml: string): BackupTarballPart[] {
  if (!layout.disk) return [{ member, dir, backupYaml }];
  return [{ member, dir, backupYaml, exclude: [layout.disk] }, { member: `${member}.img`, file: `${dir}/${layout.disk}` }];
}
