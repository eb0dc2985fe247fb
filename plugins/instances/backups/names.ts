/** Backup names and expiry times as clients send them. */
import { badRequest } from '../../../sdk/index.js';
import { NO_EXPIRY } from './record.js';

/** Backup names become file names: no slashes, no `.`/`..`, no control characters, at most 255 bytes. */
export function checkBackupName(name: string): string {
  if (name.includes('/')) throw badRequest('Backup names may not contain slashes');
  if (name === '.' || name === '..') throw badRequest(`Invalid backup name "${name}"`);
  if (/\p{Cc}/u.test(name)) throw badRequest('Backup names may not contain control characters');
  if (Buffer.byteLength(name, 'utf8') > 255) throw badRequest('Backup names may not be longer than 255 bytes');
  return name;
}

/** `backup0`, `backup1`...: the first one not taken. */
export function nextBackupName(taken: ReadonlySet<string>): string {
  for (let i = 0; ; i++) if (!taken.has(`backup${i}`)) return `backup${i}`;
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/** Times are kept to the second, in UTC, as the reference shows them. */
export const apiTime = (date: Date) => `${date.toISOString().slice(0, 19)}Z`;

/** `expires_at`: absent, empty or the zero time mean never. */
export function parseExpiresAt(value: unknown): string {
  if (value === undefined || value === null || value === '') return NO_EXPIRY;
  if (typeof value !== 'string') throw badRequest('"expires_at" must be a time (RFC 3339)');
  if (value.startsWith('0001-01-01')) return NO_EXPIRY;
  const time = Date.parse(value);
  if (!RFC3339.test(value) || Number.isNaN(time)) throw badRequest(`Invalid "expires_at" time "${value}" (expected RFC 3339, e.g. 2030-01-02T15:04:05Z)`);
  return apiTime(new Date(time));
}

export const hasExpired = (expiresAt: string, now: number) => expiresAt !== NO_EXPIRY && !expiresAt.startsWith('0001-') && Date.parse(expiresAt) <= now;
