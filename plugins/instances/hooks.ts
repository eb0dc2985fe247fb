/**
 * The family's hook set (sdk/instance-hooks), made once per daemon and published under
 * InstanceHooksRef. Inside the family the taps see the whole InstanceHandle.
 */
import {
  AsyncSeriesHook, SyncHook,
  type InstanceDraft, type InstanceEditDraft, type InstanceHooks, type InstanceRef, type InstanceDevicesChange,
  type InstanceMove, type InstanceRenaming, type InstanceLaunch, type InstanceRestoring, type UndoSteps,
} from '../../sdk/index.js';
import type { InstanceHandle } from './access.js';

/** The hooks themselves: the family calls them; what it publishes lets others only tap. */
export type FamilyHooks = ReturnType<typeof createInstanceHooks>;

export function createInstanceHooks() {
  return Object.freeze({
    creating: new SyncHook<[InstanceDraft]>(['draft']),
    devicesChanging: new AsyncSeriesHook<[InstanceDevicesChange]>(['change']),
    created: new SyncHook<[InstanceRef]>(['instance']),
    updating: new SyncHook<[InstanceEditDraft<InstanceHandle>]>(['draft']),
    updated: new SyncHook<[InstanceRef]>(['instance']),
    renaming: new SyncHook<[InstanceRenaming]>(['rename']),
    renamed: new AsyncSeriesHook<[InstanceMove]>(['move']),
    removed: new AsyncSeriesHook<[InstanceRef]>(['instance']),
    starting: new AsyncSeriesHook<[InstanceHandle]>(['instance']),
    launching: new AsyncSeriesHook<[InstanceHandle]>(['instance']),
    launchMounts: new AsyncSeriesHook<[InstanceLaunch<InstanceHandle>]>(['launch']),
    started: new SyncHook<[InstanceHandle]>(['instance']),
    stopped: new SyncHook<[InstanceHandle]>(['instance']),
    restoring: new SyncHook<[InstanceRestoring<InstanceHandle>]>(['restore']),
  }) satisfies InstanceHooks<InstanceHandle>;
}

/** The ref of an instance the family holds. */
export const refOf = (handle: InstanceHandle): InstanceRef =>
  ({ project: handle.project, name: handle.name, type: handle.record.type, pool: handle.record.pool });

/** Undo steps gathered from taps, run last-added first. */
export class Undo implements UndoSteps {
  private readonly steps: (() => Promise<void>)[] = [];

  add(step: () => Promise<void>): void {
    this.steps.push(step);
  }

  /** Best effort: every step runs even when an earlier one fails. */
  async run(): Promise<void> {
    for (const step of this.steps.splice(0).reverse()) await step().catch(() => undefined);
  }
}
