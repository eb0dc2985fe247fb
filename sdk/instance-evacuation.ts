/**
 * What the instances family does for the clustering plugin's member operations: evacuate and restore
 * (`POST /1.0/cluster/members/<name>/state`) run on the member named, over the instances it holds, end
 * when every instance was handled, and fail naming the instances that could not be (those handled stay
 * handled); removal (`DELETE /1.0/cluster/members/<name>`) asks which instances a member holds.
 */
import { createServiceRef } from './services.js';

/** `cluster.evacuate` of an instance, or the request's `mode` for all of them: `auto` follows each instance's key. */
export type EvacuationMode = 'auto' | 'stop' | 'migrate';

export interface EvacuationOptions {
  /** Overrides each instance's `cluster.evacuate` unless `auto` (the default). */
  mode?: EvacuationMode;
  /** Cancels what has not started yet (the operation's signal). */
  signal?: AbortSignal;
  /** Told what is being done, for the operation's metadata. */
  progress?: (message: string) => void;
}

export interface InstanceEvacuation {
  /**
   * Stop this member's instances, or move them to the other online members (fewest instances first),
   * recording `volatile.evacuate.origin` = this member on each.
   */
  evacuate(opts?: EvacuationOptions): Promise<void>;
  /** Bring back every instance whose `volatile.evacuate.origin` names this member, and start those that ran. */
  restore(opts?: Omit<EvacuationOptions, 'mode'>): Promise<void>;
  /** The instances `member` holds, as `project/name` (a member that holds any is removed only by force). */
  instancesOn(member: string): Promise<string[]>;
  /** A member removed by force is gone with its volumes: its instances' records (and snapshots') go too. */
  forgetMember(member: string): Promise<void>;
}

export const InstanceEvacuationRef = createServiceRef<InstanceEvacuation>('instances.evacuation');
