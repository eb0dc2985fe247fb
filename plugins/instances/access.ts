/** How route modules reach an instance without knowing how records, profiles and drivers fit together. */
import type { ApiRequest, DriverInstance, InstanceDriver } from '../../sdk/index.js';
import type { InstanceRecord } from './record.js';

export interface InstanceHandle {
  readonly project: string;
  readonly name: string;
  readonly record: InstanceRecord;
  /** Store revision of the record (for If-Match). */
  readonly rev: number;
  /** Expanded config and devices, volume path and log directory. */
  readonly inst: DriverInstance;
  readonly driver: InstanceDriver;
  /** Host path of the root filesystem (`<volume>/rootfs`). */
  readonly rootfs: string;
  /** The cluster member holding the instance, as the API shows it ("none" on a standalone server). */
  readonly location: string;
}

export interface InstanceAccess {
  /** 404 when there is no such instance in the project. */
  load(project: string, name: string): Promise<InstanceHandle>;
  /** Emit a lifecycle event about the instance (`instance-file-pushed`...). */
  lifecycle(action: string, handle: InstanceHandle, req: ApiRequest, context?: Record<string, unknown>): void;
}
