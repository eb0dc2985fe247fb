/** Stored custom volumes and their snapshots, and how the API shows volumes of every type. */
import { resourceUrl, type VolumeType } from '../../../sdk/index.js';

export type ContentType = 'filesystem' | 'block';

export interface CustomVolumeRecord {
  pool: string;
  name: string;
  description: string;
  config: Record<string, string>;
  contentType: ContentType;
  createdAt: string;
}

export interface VolumeSnapshotRecord {
  pool: string;
  volume: string;
  name: string;
  description: string;
  /** The volume's config when the snapshot was taken. */
  config: Record<string, string>;
  contentType: ContentType;
  createdAt: string;
  /** '' when it never expires. */
  expiresAt: string;
}

/** The value the API shows for "never" (as the reference does). */
export const NEVER = '0001-01-01T00:00:00Z';

export const VOLUME_TYPES: VolumeType[] = ['container', 'virtual-machine', 'image', 'custom'];

/** Store keys: collection names are per plugin, so the pool is part of the document name. */
export const volumeKey = (pool: string, name: string) => `${pool}/${name}`;
export const snapshotKey = (pool: string, volume: string, snapshot: string) => `${pool}/${volume}/${snapshot}`;

export const volumeUrl = (pool: string, type: string, name: string, project: string) =>
  resourceUrl(`/1.0/storage-pools/${encodeURIComponent(pool)}/volumes/${type}/${encodeURIComponent(name)}`, project);

export const volumeSnapshotUrl = (pool: string, volume: string, snapshot: string, project: string) =>
  resourceUrl(`/1.0/storage-pools/${encodeURIComponent(pool)}/volumes/custom/${encodeURIComponent(volume)}/snapshots/${encodeURIComponent(snapshot)}`, project);

/** What PUT replaces and the ETag covers. */
export const editableView = (vol: CustomVolumeRecord) => ({ config: vol.config, description: vol.description });

/** A volume as the API shows it, in the reference's field order. */
export interface VolumeView {
  config: Record<string, string>;
  description: string;
  name: string;
  type: VolumeType;
  used_by: string[];
  location: string;
  content_type: ContentType;
  project: string;
  created_at: string;
}

export function customView(vol: CustomVolumeRecord, project: string, usedBy: string[]): VolumeView {
  return {
    config: vol.config,
    description: vol.description,
    name: vol.name,
    type: 'custom',
    used_by: usedBy,
    location: 'none',
    content_type: vol.contentType,
    project,
    created_at: vol.createdAt,
  };
}

export function snapshotView(snap: VolumeSnapshotRecord) {
  return {
    description: snap.description,
    expires_at: snap.expiresAt || NEVER,
    name: snap.name,
    config: snap.config,
    content_type: snap.contentType,
    created_at: snap.createdAt,
  };
}
