/** Values handlers return; the kernel renders them into the wire envelopes. */
import type { Operation } from './operations.js';

export interface SyncResponse {
  kind: 'sync';
  metadata: unknown;
  /** User-modifiable content the ETag is computed from; no ETag header when absent. */
  etag?: unknown;
  headers?: Record<string, string>;
  /** Only used for creations that the spec answers with a Location (e.g. 201 is not used; 200 + Location). */
  location?: string;
}

export interface OperationResponse {
  kind: 'operation';
  operation: Operation;
}

/** A non-JSON body (file contents, exports). */
export interface RawResponse {
  kind: 'raw';
  body: Buffer | string | NodeJS.ReadableStream;
  contentType: string;
  headers?: Record<string, string>;
  /** HTTP status (default 200): a redirect answers 301 with a Location. */
  status?: number;
}

/**
 * A collection answer. The kernel applies `filter` and `recursion` to it once for everybody:
 * recursion 0 renders URLs, 1 and 2 render objects (`render(item, level)`).
 */
export interface CollectionResponse<T = unknown> {
  kind: 'collection';
  items: T[];
  url(item: T): string;
  render(item: T, recursion: 1 | 2): unknown | Promise<unknown>;
}

export type ApiResponse = SyncResponse | OperationResponse | RawResponse | CollectionResponse<any>;

export function sync(metadata: unknown = {}, opts: { etag?: unknown; headers?: Record<string, string>; location?: string } = {}): SyncResponse {
  return { kind: 'sync', metadata, ...opts };
}

/** An empty successful answer, as PUT/PATCH/DELETE give. */
export const empty = (): SyncResponse => ({ kind: 'sync', metadata: {} });

export function async(operation: Operation): OperationResponse {
  return { kind: 'operation', operation };
}

export function raw(body: RawResponse['body'], contentType = 'application/octet-stream', headers?: Record<string, string>): RawResponse {
  return { kind: 'raw', body, contentType, headers };
}

/** Send the client to `location` (a path on this server); the body says where, for clients that do not follow. */
export function redirect(location: string, status: 301 | 302 | 303 | 307 | 308 = 301): RawResponse {
  return { kind: 'raw', body: `Moved to ${location}\n`, contentType: 'text/plain; charset=utf-8', headers: { Location: location }, status };
}

export function collection<T>(items: T[], url: (item: T) => string, render: (item: T, recursion: 1 | 2) => unknown | Promise<unknown>): CollectionResponse<T> {
  return { kind: 'collection', items, url, render };
}
