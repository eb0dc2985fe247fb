/** Backup names, expiry times and progress text, shared by instance and custom volume backups. */
import { badRequest } from '../../errors.js';
import { byteSize } from '../operations/progress.js';

/** A backup that never expires shows this time. */
export const BACKUP_NO_EXPIRY = '0001-01-01T00:00:00Z';

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
export const backupTime = (date: Date) => `${date.toISOString().slice(0, 19)}Z`;

/** `expires_at`: absent, empty or the zero time mean never. */
export function parseBackupExpiry(value: unknown): string {
  if (value === undefined || value === null || value === '') return BACKUP_NO_EXPIRY;
  if (typeof value !== 'string') throw badRequest('"expires_at" must be a time (RFC 3339)');
  if (value.startsWith('0001-01-01')) return BACKUP_NO_EXPIRY;
  const time = Date.parse(value);
  if (!RFC3339.test(value) || Number.isNaN(time)) throw badRequest(`Invalid "expires_at" time "${value}" (expected RFC 3339, e.g. 2030-01-02T15:04:05Z)`);
  return backupTime(new Date(time));
}

export const backupExpired = (expiresAt: string, now: number) => expiresAt !== BACKUP_NO_EXPIRY && !expiresAt.startsWith('0001-') && Date.parse(expiresAt) <= now;

/**
 * Progress text of backup operations. lxc prints it after its own label ("Backing up instance:
 * %s", "Importing instance: %s"), so unlike the sdk's progressReporter the text carries none.
 */
export function backupProgressText(bytes: number, startedAt: number, total?: number): string {
  const seconds = Math.max((Date.now() - startedAt) / 1000, 0.001);
  const rate = `${byteSize(bytes / seconds)}/s`;
  if (total && total > 0) return `${Math.min(99, Math.floor((bytes / total) * 100))}% (${rate})`;
  return `${byteSize(bytes)} (${rate})`;
}
