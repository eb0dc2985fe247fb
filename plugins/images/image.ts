/** The stored image record, its aliases, and how the API shows them. */
import { resourceUrl, type ImageAlias, type ImageRecord } from '../../sdk/index.js';
import type { FileFormat } from '../../sdk/lib/archive/index.js';

export type ImageType = ImageRecord['type'];

export interface StoredImage {
  fingerprint: string;
  filename: string;
  size: number;
  architecture: string;
  type: ImageType;
  public: boolean;
  auto_update: boolean;
  properties: Record<string, string>;
  profiles: string[];
  created_at: string;
  uploaded_at: string;
  expires_at: string;
  last_used_at: string;
  /** What the files hold: `rootfs` is present for split images (kept beside the metadata file). */
  files: { metadata: FileFormat; rootfs?: FileFormat };
  /** Downloaded to create an instance rather than asked for (`lxc launch remote:image`). */
  cached?: boolean;
  /** Where a pulled image came from. */
  update_source?: NonNullable<ImageRecord['update_source']>;
}

export interface StoredAlias {
  name: string;
  description: string;
  /** Full fingerprint of the image. */
  target: string;
}

/** The fields PUT replaces (and the ETag covers). */
export interface ImageEditable {
  auto_update: boolean;
  properties: Record<string, string>;
  public: boolean;
  expires_at: string;
  profiles: string[];
}

export const imageUrl = (project: string, fingerprint: string): string => resourceUrl(`/1.0/images/${fingerprint}`, project);
export const aliasUrl = (project: string, name: string): string => resourceUrl(`/1.0/images/aliases/${encodeURIComponent(name)}`, project);

export function editableOf(image: StoredImage): ImageEditable {
  return { auto_update: image.auto_update, properties: image.properties, public: image.public, expires_at: image.expires_at, profiles: image.profiles };
}

/** Maps in key order, as the reference's encoder writes them. */
const sortedMap = (map: Record<string, string>): Record<string, string> => Object.fromEntries(Object.entries(map).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));

/** Field order as the reference sends it. */
export function imageView(image: StoredImage, aliases: StoredAlias[]): ImageRecord {
  return {
    auto_update: image.auto_update,
    properties: sortedMap(image.properties),
    public: image.public,
    expires_at: image.expires_at,
    profiles: image.profiles,
    aliases: aliases.map((a): ImageAlias => ({ name: a.name, description: a.description })),
    architecture: image.architecture,
    cached: image.cached ?? false,
    filename: image.filename,
    fingerprint: image.fingerprint,
    size: image.size,
    ...(image.update_source ? { update_source: image.update_source } : {}),
    type: image.type,
    created_at: image.created_at,
    last_used_at: image.last_used_at,
    uploaded_at: image.uploaded_at,
  };
}

export function aliasView(alias: StoredAlias, type: ImageType | undefined) {
  return { description: alias.description, target: alias.target, name: alias.name, type: type ?? 'container' };
}
