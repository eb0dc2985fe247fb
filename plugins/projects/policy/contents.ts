/**
 * What a project holds, as the policy checks see it: instances with their profiles already
 * applied, its profiles, custom volumes, image bytes and networks. Gathered by the gate from the
 * families' services; plain data so the checks stay pure and testable.
 */
import type { DeviceConfig, InstanceType } from '../../../sdk/index.js';

export interface InstanceEntry {
  name: string;
  type: InstanceType;
  /** Expanded config (profiles, then the instance's own keys). */
  config: Record<string, string>;
  /** Expanded devices. */
  devices: Record<string, DeviceConfig>;
  profiles: string[];
  /** The instance's own keys and devices, before profiles (to expand again when a profile changes). */
  own: { config: Record<string, string>; devices: Record<string, DeviceConfig> };
}

export interface ProfileEntry {
  name: string;
  config: Record<string, string>;
  devices: Record<string, DeviceConfig>;
}

export interface VolumeEntry {
  pool: string;
  name: string;
  /** The volume's `size` key, when set. */
  size?: string;
}

export interface ProjectContents {
  instances: InstanceEntry[];
  profiles: ProfileEntry[];
  /** Custom storage volumes of the project. */
  volumes: VolumeEntry[];
  networks: number;
}

export const emptyContents = (): ProjectContents => ({ instances: [], profiles: [], volumes: [], networks: 0 });

/** The root disk: a disk device mounted at `/` from a pool. */
export function rootDisk(devices: Record<string, DeviceConfig>): DeviceConfig | undefined {
  return Object.values(devices).find((d) => d.type === 'disk' && d.path === '/' && !d.source);
}

/** Profiles in order, then the instance's own values, as the instances family expands them. */
export function expand(profiles: ProfileEntry[], own: InstanceEntry['own']): { config: Record<string, string>; devices: Record<string, DeviceConfig> } {
  const config: Record<string, string> = {};
  const devices: Record<string, DeviceConfig> = {};
  for (const p of profiles) {
    Object.assign(config, p.config);
    Object.assign(devices, p.devices);
  }
  return { config: Object.assign(config, own.config), devices: Object.assign(devices, own.devices) };
}
