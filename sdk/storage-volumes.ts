/**
 * Custom storage volumes as other families see them: the instances family's disk devices attach
 * them (`pool` + `source`). Provided by the storage family host; absent in builds without it.
 */
import { createServiceRef } from './services.js';

export interface CustomVolumeInfo {
  pool: string;
  project: string;
  name: string;
  /** `filesystem` volumes are directories; `block` volumes hold one disk image for virtual machines. */
  contentType: 'filesystem' | 'block';
  config: Record<string, string>;
}

export interface CustomVolumesService {
  /**
   * The volume `name` on `pool` as seen from `project` (in the project `features.storage.volumes`
   * names); synchronous so that device validation can use it. Undefined when there is none.
   */
  find(pool: string, project: string, name: string): CustomVolumeInfo | undefined;
  /** The custom volumes `project` holds itself (every pool), for project limits. */
  list(project: string): CustomVolumeInfo[];
  /** The same lookup with the project mapping done exactly (async). */
  lookup(pool: string, project: string, name: string): Promise<CustomVolumeInfo | undefined>;
  /** Host directory of a filesystem volume's files (or of a block volume's image file). */
  path(volume: CustomVolumeInfo): Promise<string>;
  /** Host path of a block volume's disk image. */
  blockFile(volume: CustomVolumeInfo): Promise<string>;
}

export const CustomVolumesServiceRef = createServiceRef<CustomVolumesService>('storage-volumes');
