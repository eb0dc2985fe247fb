/** The stored form of an instance. */
import type { DeviceConfig, InstanceType } from '../../sdk/index.js';

export interface InstanceRecord {
  name: string;
  type: InstanceType;
  architecture: string;
  description: string;
  config: Record<string, string>;
  devices: Record<string, DeviceConfig>;
  profiles: string[];
  ephemeral: boolean;
  stateful: boolean;
  created_at: string;
  last_used_at: string;
  /** Storage pool of the root volume, fixed at creation. */
  pool: string;
  /**
   * The cluster member that holds the volume and runs the instance (`location` in the API): the
   * server's name when it was made ("none" on a standalone server). Absent in records made before
   * clustering existed; those belong to the server that has their volume (see location.ts).
   */
  location?: string;
}

export const NEVER = '1970-01-01T00:00:00Z';
