/** Profile names are URL segments; the reference refuses these and nothing else. */
import { badRequest } from '../../sdk/index.js';

export function checkProfileName(name: unknown): string {
  if (typeof name !== 'string' || name === '') throw badRequest('No name provided');
  if (name.includes('/')) throw badRequest('Profile names may not contain slashes');
  if (name === '.' || name === '..') throw badRequest(`Invalid profile name "${name}"`);
  if (/[\u0000-\u001f\u007f]/.test(name)) throw badRequest('Profile names may not contain control characters');
  return name;
}
