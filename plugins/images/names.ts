/** Alias names and the shapes of client-given image fields. */
import { badRequest } from '../../sdk/index.js';

/**
 * Alias names may hold slashes (`alpine/3.19`, as image servers name them) but no whitespace or
 * control characters, and are not `.` or `..` (they travel in URL paths).
 */
export function checkAliasName(name: unknown): string {
  if (typeof name !== 'string' || name === '') throw badRequest('An alias needs a name');
  if (name.length > 255) throw badRequest('Alias names are at most 255 characters long');
  if (/[\s\p{Cc}]/u.test(name)) throw badRequest(`Invalid alias name "${name}": no whitespace or control characters`);
  if (name === '.' || name === '..') throw badRequest(`Invalid alias name "${name}"`);
  return name;
}

export function stringMap(value: unknown, what: string): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw badRequest(`"${what}" must be a map of strings`);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value)) {
    if (typeof v !== 'string') throw badRequest(`"${what}.${k}" must be a string`);
    out[k] = v;
  }
  return out;
}

/** `key=value&...` headers (X-LXD-properties); several headers add up. */
export function queryHeader(value: string | string[] | undefined): URLSearchParams[] {
  if (value === undefined) return [];
  return (Array.isArray(value) ? value : [value]).map((v) => new URLSearchParams(v));
}

export const header = (value: string | string[] | undefined): string => (Array.isArray(value) ? value[0] ?? '' : value ?? '');
