/** What the `profiles` plugin offers the instances family. */
import { createServiceRef } from './services.js';
import type { DeviceConfig } from './device.js';
import type { UsedByRegistry } from './used-by.js';

export interface Profile {
  name: string;
  description: string;
  config: Record<string, string>;
  devices: Record<string, DeviceConfig>;
}

export interface ProfileChange {
  project: string;
  name: string;
  /** Absent when the profile was deleted. */
  profile?: Profile;
  /** Set when it was renamed. */
  newName?: string;
}

export interface ProfilesService {
  /** The named profiles in order; 400 naming the first one that does not exist. */
  load(project: string, names: string[]): Promise<Profile[]>;
  /** React to profile edits (the instances family re-applies live keys). Throwing refuses the edit. */
  onChange(listener: (change: ProfileChange) => Promise<void>): void;
  /** Other plugins add what uses a profile. */
  readonly usedBy: UsedByRegistry;
}

export const ProfilesServiceRef = createServiceRef<ProfilesService>('profiles');
