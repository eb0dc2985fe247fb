/** The stored project and how the API shows it. */
import type { ProjectFeature, ProjectView } from '../../sdk/index.js';

export type ProjectRecord = ProjectView;

export const DEFAULT_PROJECT = 'default';

/** Store key: projects are global, so every record sits under one fixed project key. */
export const GLOBAL = '';

export const FEATURES: ProjectFeature[] = ['images', 'profiles', 'storage.volumes', 'networks'];

/** The features a new project gets when its creator names none of them (as the reference does). */
export const DEFAULT_FEATURES: Record<string, string> = {
  'features.images': 'true',
  'features.profiles': 'true',
  'features.storage.volumes': 'true',
};

export const defaultProject = (): ProjectRecord => ({
  name: DEFAULT_PROJECT,
  description: 'Default LXD project',
  config: { 'features.images': 'true', 'features.networks': 'true', 'features.profiles': 'true', 'features.storage.volumes': 'true' },
});

export const projectUrl = (name: string) => `/1.0/projects/${encodeURIComponent(name)}`;

/** What PUT replaces and the ETag is computed from. */
export const editableView = (p: ProjectRecord) => ({ config: p.config, description: p.description });

/** Field order as the reference answers. */
export const projectView = (p: ProjectRecord, usedBy: string[]) => ({
  config: p.config,
  description: p.description,
  name: p.name,
  used_by: usedBy,
});
