/**
 * The storage family contract. The `storage` host plugin owns pools and volume records, offers
 * StorageExtensionPointRef, where driver plugins (`storage-dir`, `storage-btrfs`, a vendor's)
 * register a StorageDriver in their register phase, and provides StorageServiceRef for run time.
 *
 * A driver is a small required core (pools, volumes as directories, clone, rename, list) plus
 * optional capabilities, each an object (or method) with a type guard below: snapshots, optimized
 * backups (send/receive streams), quotas, block volumes, refresh and usage. The family checks the
 * guard and answers "not supported by driver X" itself, so a driver never has to stub what it
 * cannot do. `sdk/testing` has the conformance suite every driver runs against itself.
 */
import type { Readable } from 'node:stream';
import { createExtensionPoint, createServiceRef } from './services.js';
import type { ConfigKeyDescriptor } from './config-keys.js';
import type { UsedByRegistry } from './used-by.js';
import type { UnpackProgress } from './images.js';

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

/** How a clone may be made. */
export interface CloneOptions {
  /**
   * The clone will be used without an id map (a privileged container): a driver may share the
   * source's files read-only under a writable layer of the clone's own instead of copying them.
   */
  layered?: boolean;
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
  /** Make `target` a copy of `source`, or of its snapshot `fromSnapshot` (cheapest clone the backend has). */
  cloneVolume(pool: PoolInfo, source: VolumeRef, target: VolumeRef, fromSnapshot?: string, opts?: CloneOptions): Promise<void>;
  /**
   * Make a volume that shares files with another (a `layered` clone) hold its whole tree itself;
   * a no-op for any other volume. Drivers that never share leave it out.
   */
  flattenVolume?(pool: PoolInfo, vol: VolumeRef): Promise<void>;
  deleteVolume(pool: PoolInfo, vol: VolumeRef): Promise<void>;
  /** Rename a volume, and with `newProject` move it to another project (an instance moving between projects). */
  renameVolume(pool: PoolInfo, vol: VolumeRef, newName: string, newProject?: string): Promise<void>;
  /** Names of the volumes of a type that exist on the host (to find leftovers after a crash). */
  listVolumes(pool: PoolInfo, type: VolumeType): Promise<VolumeRef[]>;
  /**
   * Apply a change of the pool's config to the live pool before the record is stored: `changed`
   * holds the new value of every changed key ('' for a key unset). Throw to refuse the change.
   * Without this method a driver takes config changes as they come (stored, used at next mount).
   */
  update?(pool: PoolInfo, changed: Record<string, string>): Promise<void>;
  /** Unmount the pool (daemon shutdown); it stays defined and `mount` makes it usable again. */
  unmount?(pool: PoolInfo): Promise<void>;
  /** Capability `usage`: bytes used, when the backend can tell cheaply. */
  volumeUsage?(pool: PoolInfo, vol: VolumeRef): Promise<number | undefined>;
  /**
   * Capability `snapshots`: snapshots of volumes. `deleteVolume` and `renameVolume` of a driver
   * with this capability take the volume's snapshots along.
   */
  readonly snapshots?: VolumeSnapshots;
  /** Capability `optimized backups`: the volume and its snapshots as the backend's own stream. */
  readonly sendReceive?: VolumeSendReceive;
  /** Capability `quotas`: a size limit on a volume the backend enforces. */
  readonly quotas?: VolumeQuotas;
  /** Capability `block volumes`: volumes holding one raw disk image instead of a tree. */
  readonly blockVolumes?: BlockVolumes;
  /** Capability `refresh`: bring an existing volume up to date with another on the same pool, cheaply. */
  readonly refresh?: VolumeRefresh;
}

/** A part of an optimized backup: a snapshot by name, or `undefined` for the volume's current content. */
export type OptimizedPart = string | undefined;

/**
 * Optimized backups: the volume and its snapshots as the backend's own streams, one per part,
 * which only a driver of the same `format` reads back. Parts come in a fixed order, the snapshots
 * oldest first and then the volume, and each part after the first may be relative to the one
 * before it (shared data travels once): they are received in the same order.
 */
export interface VolumeSendReceive {
  /** Recorded as the backup's `backend`; a stream is received only by a driver with the same format. */
  readonly format: string;
  /**
   * Send the given snapshots (oldest first), then the volume's current content, handing each part's
   * stream to `write`, which consumes it whole before resolving. `amend` writes into a copy of the
   * volume's content before it is sent (files the archive's volume part must hold, such as the
   * instance's backup.yaml; the volume itself is untouched). Resolves with what the driver wants
   * the archive to carry about the parts (`backup/optimized_header.yaml`), or undefined.
   */
  send(
    pool: PoolInfo, vol: VolumeRef, snapshots: string[], write: (part: OptimizedPart, stream: Readable) => Promise<void>,
    amend?: (dir: string) => Promise<void>,
  ): Promise<unknown>;
  /**
   * Create `vol`, which must not exist, with the `snapshots` (oldest first) from streams `send`
   * wrote, each opened by `open` in send's order. `prepare` sees each part's content writable
   * before it becomes a snapshot or the volume (ids shifted back, stale files dropped). On failure
   * nothing of `vol` is left.
   */
  receive(
    pool: PoolInfo, vol: VolumeRef, snapshots: string[], open: (part: OptimizedPart) => Promise<Readable>,
    prepare?: (dir: string, part: OptimizedPart) => Promise<void>,
  ): Promise<void>;
}

/** Quotas: limits the backend enforces (writes past them fail with ENOSPC or EDQUOT). */
export interface VolumeQuotas {
  /** Limit the volume to `bytes`; 0 removes the limit. */
  setQuota(pool: PoolInfo, vol: VolumeRef, bytes: number): Promise<void>;
}

/**
 * The disk image's name inside a block volume's directory, and inside a virtual machine's volume
 * beside its config files (metadata.yaml, templates/), as the reference lays both out.
 */
export const BLOCK_IMAGE = 'root.img';

/** Block volumes: the volume directory holds one raw image file, `blockPath`. */
export interface BlockVolumes {
  /** Create a block volume of `bytes`, zero-filled (sparse where the backend can). Undo on failure. */
  create(pool: PoolInfo, vol: VolumeRef, bytes: number): Promise<void>;
  /** Host path of the image file. */
  blockPath(pool: PoolInfo, vol: VolumeRef): string;
}

/** Refresh on one pool: the backend can replace content and add snapshots without a file copy. */
export interface VolumeRefresh {
  /**
   * Make `target` hold what `source` holds now, after adding the source `snapshots` the target
   * lacks (oldest first). The target is untouched if this fails.
   */
  refresh(pool: PoolInfo, source: VolumeRef, target: VolumeRef, snapshots: string[]): Promise<void>;
}

/** The snapshot capability of a storage driver. Snapshots hold the same layout as their volume. */
export interface VolumeSnapshots {
  /** Host directory of a snapshot (no check that it exists). */
  path(pool: PoolInfo, vol: VolumeRef, snapshot: string): string;
  /** Freeze the volume's current content, or, with `fill`, make a snapshot from what `fill` writes. Undo on failure. */
  create(pool: PoolInfo, vol: VolumeRef, snapshot: string, fill?: (dir: string) => Promise<void>): Promise<void>;
  delete(pool: PoolInfo, vol: VolumeRef, snapshot: string): Promise<void>;
  rename(pool: PoolInfo, vol: VolumeRef, snapshot: string, newName: string): Promise<void>;
  /** Make the volume's content what the snapshot holds; the volume is untouched if this fails. */
  restore(pool: PoolInfo, vol: VolumeRef, snapshot: string): Promise<void>;
  /** Snapshot names present on the host, sorted. */
  list(pool: PoolInfo, vol: VolumeRef): Promise<string[]>;
  /** The same for many volumes of one type at once (a pool's listing), in their order; `list` for each when absent. */
  listMany?(pool: PoolInfo, type: VolumeType, vols: readonly VolumeRef[]): Promise<string[][]>;
  /** Bytes the snapshot holds on its own, when the backend can tell cheaply. */
  usage?(pool: PoolInfo, vol: VolumeRef, snapshot: string): Promise<number | undefined>;
}

/** Type guard for the snapshot capability. */
export function canSnapshot(driver: StorageDriver): driver is StorageDriver & { snapshots: VolumeSnapshots } {
  return driver.snapshots !== undefined;
}

/** Type guard for optimized backups. */
export function canSendReceive(driver: StorageDriver): driver is StorageDriver & { sendReceive: VolumeSendReceive } {
  return driver.sendReceive !== undefined;
}

/** Type guard for quotas. */
export function canQuota(driver: StorageDriver): driver is StorageDriver & { quotas: VolumeQuotas } {
  return driver.quotas !== undefined;
}

/** Type guard for block volumes. */
export function canBlock(driver: StorageDriver): driver is StorageDriver & { blockVolumes: BlockVolumes } {
  return driver.blockVolumes !== undefined;
}

/** Type guard for same-pool refresh. */
export function canRefresh(driver: StorageDriver): driver is StorageDriver & { refresh: VolumeRefresh } {
  return driver.refresh !== undefined;
}

/** Type guard for usage reporting. */
export function canReportUsage(driver: StorageDriver): driver is StorageDriver & Required<Pick<StorageDriver, 'volumeUsage'>> {
  return driver.volumeUsage !== undefined;
}

export type StorageCapability = 'snapshots' | 'optimized backups' | 'quotas' | 'block volumes' | 'refresh' | 'usage';

/** The capabilities a driver has, for messages, `lxc storage info`-like listings and the conformance suite. */
export function driverCapabilities(driver: StorageDriver): StorageCapability[] {
  const out: StorageCapability[] = [];
  if (canSnapshot(driver)) out.push('snapshots');
  if (canSendReceive(driver)) out.push('optimized backups');
  if (canQuota(driver)) out.push('quotas');
  if (canBlock(driver)) out.push('block volumes');
  if (canRefresh(driver)) out.push('refresh');
  if (canReportUsage(driver)) out.push('usage');
  return out;
}

/** The family's answer when a pool's driver lacks a capability (a 400: the request names the pool). */
export function unsupportedMessage(driver: StorageDriver, capability: StorageCapability): string {
  return `Storage driver "${driver.name}" does not support ${capability}`;
}

/** How a new instance volume is filled. */
export type VolumeSource =
  | { kind: 'empty' }
  /**
   * From an image: unpacked once per pool into an image volume, then cloned. `onProgress` hears the
   * unpack's progress when this volume waits for one (whoever started it); nothing when the pool
   * already holds the image.
   */
  | {
    kind: 'image'; fingerprint: string; project: string;
    unpack: (dir: string, onProgress?: UnpackProgress) => Promise<void>;
    onProgress?: UnpackProgress;
    /** The instance runs without an id map: the image's files may be shared (CloneOptions.layered). */
    layered?: boolean;
  }
  /**
   * From another volume, on this pool or another one; from one of its snapshots with `snapshot`;
   * `snapshots` names source snapshots to recreate on the new volume, oldest first.
   */
  | { kind: 'copy'; pool: string; volume: VolumeRef; snapshot?: string; snapshots?: string[] }
  /** Written by `fill` (a backup import); `snapshots` are filled first, oldest first. */
  | { kind: 'fill'; fill: (dir: string) => Promise<void>; snapshots?: { name: string; fill: (dir: string) => Promise<void> }[] }
  /**
   * Received from an optimized backup of driver format `format` (see VolumeSendReceive.receive);
   * a 400 when the pool's driver has another format or none.
   */
  | {
    kind: 'receive'; format: string; snapshots: string[]; open: (part: OptimizedPart) => Promise<Readable>;
    prepare?: (dir: string, part: OptimizedPart) => Promise<void>;
  };

/** What an instance or image volume carries beside its content: description, config, and those of its snapshots. */
export interface VolumeState {
  description: string;
  config: Record<string, string>;
  /** By snapshot name: the volume's description and config when the snapshot was taken. */
  snapshots: Record<string, { description: string; config: Record<string, string> }>;
}

/** Registration into the storage family, open while plugins register. */
export interface StorageExtensionPoint {
  registerDriver(driver: StorageDriver): void;
}

export const StorageExtensionPointRef = createExtensionPoint<StorageExtensionPoint>('storage.registration');

/** What the storage family answers at run time. */
export interface StorageService {
  /** Throws 404 when there is no such pool, 400 when it is unavailable. */
  pool(name: string): Promise<PoolInfo>;
  poolNames(): Promise<string[]>;
  /**
   * Create an instance volume. It carries `state` when given (a backup import); otherwise the
   * source's config with a copy, or the pool's `volume.*` defaults.
   */
  createInstanceVolume(pool: string, vol: VolumeRef, source: VolumeSource, state?: VolumeState): Promise<string>;
  /** Description and config of an instance or image volume and of its snapshots (empty when it has none). */
  volumeState(pool: string, vol: VolumeRef): Promise<VolumeState>;
  deleteVolume(pool: string, vol: VolumeRef): Promise<void>;
  /** Make a volume that shares an image's files hold its whole tree (before an id-mapped start); else a no-op. */
  flattenVolume(pool: string, vol: VolumeRef): Promise<void>;
  /** Rename a volume (and its snapshots), into `newProject` when given. */
  renameVolume(pool: string, vol: VolumeRef, newName: string, newProject?: string): Promise<void>;
  /** Host directory of a volume (no check that it exists). */
  volumePath(pool: string, vol: VolumeRef): Promise<string>;
  volumeUsage(pool: string, vol: VolumeRef): Promise<number | undefined>;
  /** Volumes of a type present on the pool's host storage. */
  listVolumes(pool: string, type: VolumeType): Promise<VolumeRef[]>;
  /** Drop the unpacked image volumes of an image on every pool (image deleted). */
  deleteImageVolumes(fingerprint: string): Promise<void>;
  /** Throws 400 when the pool's driver has no snapshot capability. */
  createSnapshot(pool: string, vol: VolumeRef, snapshot: string): Promise<void>;
  deleteSnapshot(pool: string, vol: VolumeRef, snapshot: string): Promise<void>;
  renameSnapshot(pool: string, vol: VolumeRef, snapshot: string, newName: string): Promise<void>;
  restoreSnapshot(pool: string, vol: VolumeRef, snapshot: string): Promise<void>;
  snapshotPath(pool: string, vol: VolumeRef, snapshot: string): Promise<string>;
  /** Snapshot names present on the host ([] when the driver keeps none). */
  listSnapshots(pool: string, vol: VolumeRef): Promise<string[]>;
  /** The same for many volumes of one type on a pool, in their order: one read of the pool where its driver can. */
  listSnapshotsOfMany(pool: string, type: VolumeType, vols: readonly VolumeRef[]): Promise<string[][]>;
  snapshotUsage(pool: string, vol: VolumeRef, snapshot: string): Promise<number | undefined>;
  /**
   * Make the existing volume `vol` on `pool` hold what the source holds, adding the source's
   * `snapshots` the target lacks (an incremental refresh copy).
   */
  refreshVolume(pool: string, vol: VolumeRef, source: { pool: string; volume: VolumeRef; snapshots: string[] }): Promise<void>;
  /** Other plugins add what uses a pool (instances, profiles). */
  readonly poolUsedBy: UsedByRegistry;
  /** Limit a volume to `bytes` (0: no limit). 400 when the pool's driver has no quotas and bytes > 0. */
  setVolumeQuota(pool: string, vol: VolumeRef, bytes: number): Promise<void>;
  /** The optimized backup format of the pool's driver, undefined when it has none. */
  optimizedFormat(pool: string): Promise<string | undefined>;
  /**
   * The driver's streams of a volume's snapshots (oldest first) and then the volume, each handed to
   * `write`; resolves with the driver's header for the archive. 400 without optimized backups.
   * Volumes are received with a `receive` VolumeSource.
   */
  sendVolume(
    pool: string, vol: VolumeRef, snapshots: string[], write: (part: OptimizedPart, stream: Readable) => Promise<void>,
    amend?: (dir: string) => Promise<void>,
  ): Promise<unknown>;
  /** A registered driver by name (driver tests and the conformance suite reach drivers this way). */
  driver(name: string): StorageDriver | undefined;
}

export const StorageServiceRef = createServiceRef<StorageService>('storage');
/** The manifests' name of the storage driver extension point (`provides.registers`). */
export const STORAGE_DRIVER_POINT = 'storage-driver';
