/** The three response envelopes of spec part 2.1, serialised by hand on the hot path. */
import { createHash } from 'node:crypto';
import { ALLOWED_ERROR_STATUSES, type ErrorStatus, type OperationView } from '../../sdk/index.js';
import { clientMessage } from './client-message.js';

/** A sync envelope up to its metadata's first byte. */
const SYNC_HEAD = '{"type":"sync","status":"Success","status_code":200,"operation":"","error_code":0,"error":"","metadata":';

export function syncBody(metadata: unknown): string {
  return `${SYNC_HEAD}${JSON.stringify(metadata ?? {})}}`;
}

const LIST_HEAD = Buffer.from(`${SYNC_HEAD}[`);
const LIST_TAIL = Buffer.from(']}');
const GROUPS_HEAD = Buffer.from(`${SYNC_HEAD}{`);
const GROUPS_TAIL = Buffer.from('}}');
const COMMA = Buffer.from(',');
const CLOSE_LIST = Buffer.from(']');

/** `items` into `parts`, a comma between each two. */
function pushJoined(parts: Buffer[], items: Buffer[]): void {
  items.forEach((item, i) => {
    if (i > 0) parts.push(COMMA);
    parts.push(item);
  });
}

/**
 * A sync envelope around a list whose items are serialised already, as bytes, in its pieces in order
 * (joined, or sent in slices: list-stream.ts): a listing of 10,000 instances is 13 MB, and as one
 * JavaScript string it would be built, flattened and encoded again on the V8 heap at every request
 * (the garbage collector's work, on the main thread).
 */
export function syncListParts(items: Buffer[]): Buffer[] {
  const parts: Buffer[] = [LIST_HEAD];
  pushJoined(parts, items);
  parts.push(LIST_TAIL);
  return parts;
}

/**
 * A sync envelope around an object of lists whose items are serialised already (operations grouped by
 * status): what JSON.stringify would write for it, without serialising the items again.
 */
export function syncGroupedBody(groups: [string, Buffer[]][]): Buffer {
  const parts: Buffer[] = [GROUPS_HEAD];
  groups.forEach(([group, items], g) => {
    parts.push(Buffer.from(`${g > 0 ? ',' : ''}${JSON.stringify(group)}:[`));
    pushJoined(parts, items);
    parts.push(CLOSE_LIST);
  });
  parts.push(GROUPS_TAIL);
  return Buffer.concat(parts);
}

/** An item of a list as JSON.stringify would write it inside the list (undefined becomes null). */
export const stringifyItem = (item: unknown): string => JSON.stringify(item) ?? 'null';

/** The same, as UTF-8 bytes. */
export const encodeItem = (item: unknown): Buffer => Buffer.from(stringifyItem(item));

/**
 * The same, in memory of its own: a small Buffer.from() is a slice of a shared 8 KiB slab, and one
 * kept for long (a cached fragment) would keep the whole slab, and whatever else was cut from it, alive.
 */
export function encodeItemToKeep(item: unknown): Buffer {
  const text = stringifyItem(item);
  const bytes = Buffer.allocUnsafeSlow(Buffer.byteLength(text));
  bytes.write(text);
  return bytes;
}

export function asyncBody(op: OperationView): string {
  return JSON.stringify({ type: 'async', status: 'OK', status_code: 100, operation: `/1.0/operations/${op.id}`, error_code: 0, error: '', metadata: op });
}

/** Every error envelope, from every layer, is built here: its message passes the client filter. */
export function errorBody(status: ErrorStatus, message: string, metadata: unknown = null): string {
  return JSON.stringify({ type: 'error', status: '', status_code: 0, operation: '', error_code: status, error: clientMessage(message), metadata });
}

const allowed = new Set<number>(ALLOWED_ERROR_STATUSES);

/** Map any HTTP status a lower layer produced onto the allowed error set. */
export function allowedStatus(status: number): ErrorStatus {
  if (allowed.has(status)) return status as ErrorStatus;
  if (status >= 500) return 500;
  return status === 405 || status === 413 || status === 415 || status === 422 ? 400 : status >= 400 ? 400 : 500;
}

/** ETag of user-modifiable content: SHA-256 of its JSON form. */
export function etagOf(content: unknown): string {
  return createHash('sha256').update(JSON.stringify(content ?? null)).digest('hex');
}
