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
  /** Every profile of the project (the project's own, whatever its features.profiles says). */
  list(project: string): Promise<Profile[]>;
  /** Give a project its own empty `default` profile (a project created with `features.profiles`). */
  createDefault(project: string): Promise<void>;
  /** Drop every profile a project holds (the project is going away or gives up its own profiles). */
  removeAll(project: string): Promise<void>;
  /** Carry a project's profiles over to its new name (a project rename). */
  moveProject(from: string, to: string): Promise<void>;
  /** React to profile edits (the instances family re-applies live keys). Throwing refuses the edit. */
  onChange(listener: (change: ProfileChange) => Promise<void>): void;
  /** Other plugins add what uses a profile. */
  readonly usedBy: UsedByRegistry;
}

export const ProfilesServiceRef = createServiceRef<ProfilesService>('profiles');
