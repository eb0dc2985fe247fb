/**
 * Devices of running instances that follow the host (DeviceType.followHost): who follows, and the
 * run config each device was last plugged with. A type's `changed` call is coalesced (a burst of
 * kernel announcements is one re-plug) and handed to the family, which re-plugs under the
 * instance's lock; a device that stopped following in the meantime is left alone.
 */
import type { DeviceRunConfig } from '../../sdk/index.js';

/** Announcements closer together than this are one change (a device and its partitions). */
const COALESCE_MS = 50;

interface Follower {
  stop: () => void;
  /** What the device was last plugged with; undefined after an adoption (plug again once). */
  run?: DeviceRunConfig;
  timer?: NodeJS.Timeout;
}

export type Replug = (project: string, instance: string, device: string) => Promise<void>;

const keyOf = (project: string, instance: string) => `${project}/${instance}`;

export class HostFollowers {
  private readonly byInstance = new Map<string, Map<string, Follower>>();

  constructor(private readonly replug: Replug) {}

  /**
   * Start following; `start` is the type's followHost, given the function that reports a change.
   * A device already followed is stopped first (a re-plug follows afresh).
   */
  follow(project: string, instance: string, device: string, run: DeviceRunConfig | undefined, start: (changed: () => void) => () => void): void {
    this.unfollow(project, instance, device);
    const follower: Follower = { stop: () => undefined, run };
    const changed = () => {
      if (this.byInstance.get(keyOf(project, instance))?.get(device) !== follower || follower.timer) return;
      follower.timer = setTimeout(() => {
        follower.timer = undefined;
        void this.replug(project, instance, device);
      }, COALESCE_MS);
      follower.timer.unref();
    };
    let devices = this.byInstance.get(keyOf(project, instance));
    if (!devices) this.byInstance.set(keyOf(project, instance), (devices = new Map()));
    devices.set(device, follower);
    follower.stop = start(changed);
  }

  /** The run config a followed device was last plugged with (undefined: unknown, or not followed). */
  lastRun(project: string, instance: string, device: string): DeviceRunConfig | undefined {
    return this.byInstance.get(keyOf(project, instance))?.get(device)?.run;
  }

  isFollowing(project: string, instance: string, device: string): boolean {
    return this.byInstance.get(keyOf(project, instance))?.has(device) ?? false;
  }

  /** Record what a re-plug gave the device. */
  plugged(project: string, instance: string, device: string, run: DeviceRunConfig): void {
    const follower = this.byInstance.get(keyOf(project, instance))?.get(device);
    if (follower) follower.run = run;
  }

  /** Stop following one device, or every device of the instance. */
  unfollow(project: string, instance: string, device?: string): void {
    const devices = this.byInstance.get(keyOf(project, instance));
    if (!devices) return;
    for (const [name, follower] of [...devices]) {
      if (device !== undefined && name !== device) continue;
      devices.delete(name);
      HostFollowers.end(follower);
    }
    if (!devices.size) this.byInstance.delete(keyOf(project, instance));
  }

  /** Daemon shutdown: nothing follows any more. */
  clear(): void {
    for (const devices of this.byInstance.values()) for (const follower of devices.values()) HostFollowers.end(follower);
    this.byInstance.clear();
  }

  private static end(follower: Follower): void {
    clearTimeout(follower.timer);
    try {
      follower.stop();
    } catch {
      // A type failing to stop watching must not keep the instance from stopping.
    }
  }
}
