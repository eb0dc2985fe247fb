/** Timestamps as the reference writes them (RFC 3339, fractions only when there are some). */

/** `expires_at` of an image that never expires (the reference shows Unix time zero). */
export const NEVER_EXPIRES = '1970-01-01T00:00:00Z';
/** `last_used_at` of an image never used (the reference shows Go's zero time). */
export const NEVER_USED = '0001-01-01T00:00:00Z';

export function apiTime(date: Date): string {
  return date.toISOString().replace('.000Z', 'Z');
}

export const unixTime = (seconds: number): string => apiTime(new Date(seconds * 1000));

/**
 * A client-given time: undefined for "not set" (absent, empty, or either zero time, which is
 * what clients echo back for an unset date); throws on anything unreadable.
 */
export function parseClientTime(value: unknown): string | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') throw new Error('must be a timestamp string');
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw new Error(`"${value}" is not a valid timestamp`);
  if (ms <= 0) return undefined;
  return apiTime(new Date(ms));
}
