/**
 * The storage family contract. The `storage` host plugin owns pools and volume records and
 * provides StorageServiceRef; driver plugins (`storage-dir`, ...) register a StorageDriver with it.
 */
import { createServiceRef } from './services.js';
import type { ConfigKeyDescriptor } from './config-keys.js';
import type { UsedByRegistry } from './used-by.js';

export type VolumeType = 'container' | 'virtual-machine' | 'image' | 'custom';

export interface VolumeRef {
  type: VolumeType;
  project: string;
  /** Instance name, image fingerprint or custom volume name. */
  name: string;
}

export interface PoolInfo {
  name: string;
  driver: string;
  config: Record<string, string>;
}

export interface PoolResources {
  space: { used: number; total: number };
  inodes: { used: number; total: number };
}

export interface StorageDriver {
  readonly name: string;
  /** Shown as `environment.storage_version` and in `storage_supported_drivers`. */
  readonly version?: string;
  /** Whether volumes live on shared storage reachable from every cluster member. */
  readonly remote?: boolean;
  /** Pool config keys this driver accepts (scope `pool`), beyond the family's own. */
  readonly configKeys?: ConfigKeyDescriptor[];
  /** Fill in defaults (e.g. `source`) before the pool record is stored. */
  fillDefaults?(pool: PoolInfo, dataDir: string): void;
  /** Create the pool on the host; undo everything it did before throwing. */
  create(pool: PoolInfo): Promise<void>;
  delete(pool: PoolInfo): Promise<void>;
  /** Make the pool usable (called at boot for every pool). Throw when it cannot be. */
  mount(pool: PoolInfo): Promise<void>;
  resources(pool: PoolInfo): Promise<PoolResources>;
  /** Host directory of a volume (holding `rootfs/` for instance and image volumes). */
  volumePath(pool: PoolInfo, vol: VolumeRef): string;
  /** Create an empty volume, then let `fill` populate it; removes the volume if `fill` throws. */
  createVolume(pool: PoolInfo, vol: VolumeRef, fill?: (dir: string) => Promise<void>): Promise<void>;
  /** Make `target` a copy of `source` (cheapest clone the backend has). */
  cloneVolume(pool: PoolInfo, source: VolumeRef, target: VolumeRef): Promise<void>;
  deleteVolume(pool: PoolInfo, vol: VolumeRef): Promise<void>;
  renameVolume(pool: PoolInfo, vol: VolumeRef, newName: string): Promise<void>;
  /** Names of the volumes of a type that exist on the host (to find leftovers after a crash). */
  listVolumes(pool: PoolInfo, type: VolumeType): Promise<VolumeRef[]>;
  /** Bytes used, when the backend can tell cheaply. */
  volumeUsage?(pool: PoolInfo, vol: VolumeRef): Promise<number | undefined>;
}

/** How a new instance volume is filled. */
export type VolumeSource =
  | { kind: 'empty' }
  /** From an image: unpacked once per pool into an image volume, then cloned. */
  | { kind: 'image'; fingerprint: string; project: string; unpack: (dir: string) => Promise<void> }
  | { kind: 'copy'; pool: string; volume: VolumeRef };

export interface StorageService {
  registerDriver(driver: StorageDriver): void;
  /** Throws 404 when there is no such pool, 400 when it is unavailable. */
  pool(name: string): Promise<PoolInfo>;
  poolNames(): Promise<string[]>;
  createInstanceVolume(pool: string, vol: VolumeRef, source: VolumeSource): Promise<string>;
  deleteVolume(pool: string, vol: VolumeRef): Promise<void>;
  renameVolume(pool: string, vol: VolumeRef, newName: string): Promise<void>;
  /** Host directory of a volume (no check that it exists). */
  volumePath(pool: string, vol: VolumeRef): Promise<string>;
  volumeUsage(pool: string, vol: VolumeRef): Promise<number | undefined>;
  /** Volumes of a type present on the pool's host storage. */
  listVolumes(pool: string, type: VolumeType): Promise<VolumeRef[]>;
  /** Drop the unpacked image volumes of an image on every pool (image deleted). */
  deleteImageVolumes(fingerprint: string): Promise<void>;
  /** Other plugins add what uses a pool (instances, profiles). */
  readonly poolUsedBy: UsedByRegistry;
}

export const StorageServiceRef = createServiceRef<StorageService>('storage');
