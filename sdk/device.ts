/**
 * Device types (`disk`, `nic`, ...): each validates its config and, when an instance starts,
 * returns a declarative run config that the instance driver applies. Device types are registered
 * with the instances family (see InstancesServiceRef in sdk/instance).
 */
import type { InstanceType } from './instance-types.js';

export type DeviceConfig = Record<string, string>;

export interface DeviceValidationContext {
  instanceType: InstanceType | 'any';
  /** Device name (the key in `devices`). */
  name: string;
  /** Validating a profile's devices rather than an instance's expanded devices. */
  profile: boolean;
  project: string;
}

/** What a device asks the driver to set up when the instance starts. */
export interface DeviceRunConfig {
  /** The root filesystem (only the root disk sets it). */
  rootfs?: { path: string };
  mounts?: DeviceMount[];
}

export interface DeviceMount {
  /** Host path. */
  source: string;
  /** Path inside the instance (absolute). */
  target: string;
  readonly?: boolean;
  /** rprivate, rshared, rslave, private, shared, slave. */
  propagation?: string;
  /** Idmapped bind mount so host ownership shows through the instance's id map. */
  shift?: boolean;
  /** Skip silently when the source is missing (`required=false`). */
  optional?: boolean;
  /** The source is a file rather than a directory. */
  file?: boolean;
}

export interface DeviceStartContext {
  project: string;
  instanceName: string;
  instanceType: InstanceType;
  name: string;
  config: DeviceConfig;
}

export interface DeviceType {
  readonly type: string;
  /** Throws an ApiError (400) naming the bad option. */
  validate(config: DeviceConfig, ctx: DeviceValidationContext): void;
  start(ctx: DeviceStartContext): Promise<DeviceRunConfig>;
  stop?(ctx: DeviceStartContext): Promise<void>;
  /** Whether the device can be added to or removed from a running instance. */
  readonly hotplug?: boolean;
}
