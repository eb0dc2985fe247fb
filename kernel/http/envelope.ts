/** The three response envelopes of spec part 2.1, serialised by hand on the hot path. */
import { createHash } from 'node:crypto';
import { ALLOWED_ERROR_STATUSES, type ErrorStatus, type OperationView } from '../../sdk/index.js';
import { clientMessage } from './client-message.js';

export function syncBody(metadata: unknown): string {
  return `{"type":"sync","status":"Success","status_code":200,"operation":"","error_code":0,"error":"","metadata":${JSON.stringify(metadata ?? {})}}`;
}

/** A sync envelope around a list whose items are serialised already. */
export function syncListBody(items: string[]): string {
  return `{"type":"sync","status":"Success","status_code":200,"operation":"","error_code":0,"error":"","metadata":[${items.join(',')}]}`;
}

/** An item of a list as JSON.stringify would write it inside the list (undefined becomes null). */
export const stringifyItem = (item: unknown): string => JSON.stringify(item) ?? 'null';

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
