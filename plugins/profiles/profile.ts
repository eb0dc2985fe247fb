/** The stored profile and how the API shows it. */
import { resourceUrl, type Profile } from '../../sdk/index.js';

export type { Profile };

export const DEFAULT_PROFILE = 'default';

export const profileUrl = (project: string, name: string) => resourceUrl(`/1.0/profiles/${encodeURIComponent(name)}`, project);

/** What PUT replaces and the ETag is computed from. */
export const editableView = (p: Profile) => ({ config: p.config, description: p.description, devices: p.devices });

/** Field order as the reference answers. */
export const profileView = (p: Profile, usedBy: string[]) => ({
  config: p.config,
  description: p.description,
  devices: p.devices,
  name: p.name,
  used_by: usedBy,
});
