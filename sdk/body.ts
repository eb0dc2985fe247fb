/** Checks of the JSON shapes clients send (maps of strings, optional scalars), each failing with a 400 naming the field. */
import { badRequest } from './errors.js';

/** A JSON object (or YAML map): not null, not a list. */
export const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The body as an object; absent means empty. */
export function bodyObject(body: unknown): Record<string, any> {
  if (body === undefined || body === null) return {};
  if (!isPlainObject(body)) throw badRequest('The request body must be a JSON object');
  return body as Record<string, any>;
}

/**
 * Config-style maps. Request bodies reach this already checked by their route's shape (strings only,
 * body-shape.ts); YAML documents (backup indexes) may hold numbers and booleans, taken as their text
 * as the reference's YAML decoding takes them.
 */
export function stringMap(value: unknown, what: string): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw badRequest(`"${what}" must be a map of strings`);
  const out: Record<string, string> = {};
  for (const [key, v] of Object.entries(value)) {
    if (typeof v === 'string') out[key] = v;
    else if (typeof v === 'number' || typeof v === 'boolean') out[key] = String(v);
    else throw badRequest(`"${what}" value of "${key}" must be a string`);
  }
  return out;
}

export function optionalString(value: unknown, what: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw badRequest(`"${what}" must be a string`);
  return value;
}

export function optionalBool(value: unknown, what: string): boolean | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') throw badRequest(`"${what}" must be true or false`);
  return value;
}
