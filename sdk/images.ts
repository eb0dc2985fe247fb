/** What the `images` plugin offers the instances family. */
import { createServiceRef } from './services.js';
import type { OperationControl } from './operations.js';
import type { ApiRequest } from './routes.js';
import type { UsedByRegistry } from './used-by.js';

export interface ImageAlias {
  name: string;
  description: string;
}

/** An image as GET /1.0/images/<fingerprint> shows it. */
export interface ImageRecord {
  fingerprint: string;
  filename: string;
  size: number;
  architecture: string;
  type: 'container' | 'virtual-machine';
  public: boolean;
  auto_update: boolean;
  cached: boolean;
  properties: Record<string, string>;
  aliases: ImageAlias[];
  profiles: string[];
  created_at: string;
  uploaded_at: string;
  expires_at: string;
  last_used_at: string;
  update_source?: { alias: string; certificate: string; protocol: string; server: string; image_type: string };
}

/** The parsed metadata.yaml of an image. */
export interface ImageMetadata {
  architecture: string;
  creation_date: number;
  expiry_date?: number;
  properties: Record<string, string>;
  /** Path inside the instance -> template spec. */
  templates: Record<string, ImageTemplate>;
}

export interface ImageTemplate {
  /** create, copy, start, rename. */
  when: string[];
  create_only?: boolean;
  template: string;
  properties?: Record<string, string>;
  uid?: string;
  gid?: string;
  mode?: string;
}

/** What an image source provider hands over: a directory laid out like an unpacked image. */
export interface ImageSourceContent {
  /** Holds `rootfs/`, and `metadata.yaml` and `templates/` when the source has them. */
  dir: string;
  architecture: string;
  type: 'container' | 'virtual-machine';
  /** Properties carried from the source (the instance's `image.*` keys), overridden by the request's. */
  properties: Record<string, string>;
  /** Called once the image is packed (or packing failed): unlock, remove scratch copies. */
  release(): Promise<void>;
}

/**
 * Makes images from something another plugin owns, for `POST /1.0/images` with a `source.type`
 * that is not an upload (`instance`, `snapshot`).
 */
export interface ImageSourceProvider {
  readonly type: string;
  /** Check the request's `source` (404 unknown, 400 refused, e.g. a running instance) and open its content. */
  open(project: string, source: Record<string, unknown>): Promise<ImageSourceContent>;
}

/** What one stored image file holds, told by its first bytes (never by its name). */
export type ImageFileKind = 'tarball' | 'squashfs' | 'qcow2';

/** One stored image file, to be read as it is (never written through this). */
export interface StoredImageFile {
  path: string;
  size: number;
  kind: ImageFileKind;
  /** The file name ending exports give it (`.tar.xz`, `.squashfs`, `.img`). */
  extension: string;
}

/** An image's files: `rootfs` only for a split image (a unified tarball is `metadata` alone). */
export interface StoredImageFiles {
  metadata: StoredImageFile;
  rootfs?: StoredImageFile;
}

/** Bytes of an image's files read so far out of their total size; done = total once it is unpacked. */
export type UnpackProgress = (done: number, total: number) => void;

export interface ImagesService {
  /** Another plugin answers `POST /1.0/images` for a source type (`instance`, `snapshot`). */
  registerSource(provider: ImageSourceProvider): void;
  /**
   * Download an image another server holds (`source` as POST /1.0/images takes it: `server`,
   * `protocol`, `alias` or `fingerprint`, `certificate`, `secret`) into the project's images as a
   * cached one, reporting `download_progress` on `op`; answers its record. An image the project holds
   * already is not fetched again. A bad source is a 400 before anything is fetched.
   */
  pullCached(req: ApiRequest, source: Record<string, unknown>, op: OperationControl): Promise<ImageRecord>;
  /** Whether an instance source names an image on another server (`server` set). */
  isRemote(source: Record<string, unknown>): boolean;
  /** A 400 when a remote source is malformed (checked before the request is answered). */
  checkRemote(source: Record<string, unknown>): void;
  /** By alias, full fingerprint or unique fingerprint prefix; 404 when nothing matches. */
  resolve(project: string, source: { alias?: string; fingerprint?: string }): Promise<ImageRecord>;
  /**
   * Unpack the image into `dir`: `dir/rootfs/`, `dir/metadata.yaml`, `dir/templates/`.
   * Ownership is kept as stored in the image (the instance driver maps ids at mount time).
   * `onProgress` hears how much of the image's files has been read, ending with done = total.
   */
  unpack(fingerprint: string, dir: string, onProgress?: UnpackProgress): Promise<void>;
  /** The images a project holds (its own records: callers map the project through `features.images`). */
  list(project: string): Promise<ImageRecord[]>;
  /**
   * Where the files of an image lie, for serving them to others (simplestreams); 404 when the
   * image or its files are gone. Files are per fingerprint and never change once in place.
   */
  files(fingerprint: string): Promise<StoredImageFiles>;
  /** Record a use (last_used_at). */
  markUsed(project: string, fingerprint: string): Promise<void>;
  /** Other plugins add what uses an image (instances created from it). */
  readonly usedBy: UsedByRegistry;
}

export const ImagesServiceRef = createServiceRef<ImagesService>('images');
