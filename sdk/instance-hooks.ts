/**
 * The instances family's hook set: what happens to instances, for whoever follows them (backups,
 * snapshots, templates, quotas and devices inside the family; other plugins beside it). The
 * family calls the hooks; everyone else only taps them, with a name and a `Stage`.
 *
 * The `...ing` hooks run inside a change: their taps may add to it (keys in the record being
 * written, undo steps) or refuse it by throwing. The past-tense hooks run once the change is done
 * and stored: a tap that fails is logged, and the change stands.
 */
import type { FamilyAsyncHook, FamilySyncHook } from './hooks.js';
import { createHookSetRef } from './services.js';
import type { DeviceConfig, DeviceMount } from './device.js';
import type { DriverInstance, InstanceType } from './instance.js';

/** Which instance, and the pool of its root volume. */
export interface InstanceRef {
  readonly project: string;
  readonly name: string;
  readonly type: InstanceType;
  readonly pool: string;
}

/** An instance as the family holds it while it works on it; the family's own taps see more. */
export interface InstanceSubject {
  readonly project: string;
  readonly name: string;
  /** Expanded config and devices, volume path, log directory. */
  readonly inst: DriverInstance;
}

/** How a new instance came to be: from an image or empty (`create`), a copy, a backup import. */
export type InstanceOrigin = 'create' | 'copy' | 'import';

/** A new instance's record before it is written. */
export interface InstanceDraft {
  readonly project: string;
  readonly name: string;
  readonly type: InstanceType;
  readonly origin: InstanceOrigin;
  /** The record's own config: taps add the keys they keep there (volatile ones). */
  readonly config: Record<string, string>;
  /** The devices it will have, profiles applied. */
  readonly devices: Record<string, DeviceConfig>;
}

/** An edit of an instance before its record is written. */
export interface InstanceEditDraft<S extends InstanceSubject = InstanceSubject> {
  readonly instance: S;
  /** Its devices now and after the edit, profiles applied. */
  readonly before: Record<string, DeviceConfig>;
  readonly after: Record<string, DeviceConfig>;
  /** The record's own config after the edit: taps add, change or drop the keys they keep there. */
  readonly config: Record<string, string>;
}

/** Steps that undo a tap's work when a later step of the change fails. */
export interface UndoSteps {
  add(step: () => Promise<void>): void;
}

/** The devices an instance's volume serves change: a new volume (`before` undefined) or an edit. */
export interface InstanceDevicesChange {
  readonly instance: InstanceRef;
  readonly before: Record<string, DeviceConfig> | undefined;
  readonly after: Record<string, DeviceConfig>;
  /** Run (last added first) when the change fails after the hook. */
  readonly undo: UndoSteps;
}

/** Why an instance changes name or project: a rename (alone, or ending a move to another pool), a move to another project. */
export type InstanceMoveCause = 'rename' | 'pool-move' | 'project-move';

export interface InstanceMove {
  readonly from: InstanceRef;
  readonly to: InstanceRef;
  readonly cause: InstanceMoveCause;
}

/** A rename whose record, under its new name, is being written. */
export interface InstanceRenaming extends InstanceMove {
  /** The record's own config under the new name: taps add the keys they keep there. */
  readonly config: Record<string, string>;
}

/** A snapshot restore whose record is being written. */
export interface InstanceRestoring<S extends InstanceSubject = InstanceSubject> {
  readonly instance: S;
  readonly snapshot: string;
  /** The snapshot's config as it was taken. */
  readonly snapshotConfig: Readonly<Record<string, string>>;
  /** The instance's own config after the restore: taps put back the keys the snapshot's files decide. */
  readonly config: Record<string, string>;
}

/**
 * A start about to hand its devices to the driver: taps add mounts that belong to no device
 * (the guest socket's directory); the family passes them to the driver with the devices' own.
 */
export interface InstanceLaunch<S extends InstanceSubject = InstanceSubject> {
  readonly instance: S;
  readonly mounts: DeviceMount[];
}

export interface InstanceHooks<S extends InstanceSubject = InstanceSubject> {
  /** A new instance's record is being filled. */
  creating: FamilySyncHook<[InstanceDraft]>;
  /** Its new volume exists (or an edit changes what it serves); the record is written next. */
  devicesChanging: FamilyAsyncHook<[InstanceDevicesChange]>;
  created: FamilySyncHook<[InstanceRef]>;
  /** An edit is being recorded. */
  updating: FamilySyncHook<[InstanceEditDraft<S>]>;
  updated: FamilySyncHook<[InstanceRef]>;
  /** The record is being renamed (or moved to another project), in one transaction. */
  renaming: FamilySyncHook<[InstanceRenaming]>;
  /** A rename or a move to another project is done. */
  renamed: FamilyAsyncHook<[InstanceMove]>;
  /** The record is gone; the volume goes next. */
  removed: FamilyAsyncHook<[InstanceRef]>;
  /** A start begins: nothing of the instance runs yet. A failure fails the start. */
  starting: FamilyAsyncHook<[S]>;
  /** Its devices are ready and the driver runs it next. A failure fails the start and releases the devices. */
  launching: FamilyAsyncHook<[S]>;
  /** Right after `launching`: extra mounts for this start (see InstanceLaunch). A failure fails the start. */
  launchMounts: FamilyAsyncHook<[InstanceLaunch<S>]>;
  started: FamilySyncHook<[S]>;
  /** It stopped (asked to, from inside, or by a crash) and its state is recorded. */
  stopped: FamilySyncHook<[S]>;
  /** A snapshot restore is being recorded. */
  restoring: FamilySyncHook<[InstanceRestoring<S>]>;
}

export const InstanceHooksRef = createHookSetRef<InstanceHooks>('instance-hooks');
