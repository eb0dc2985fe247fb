/** Pool names become directory names and URL segments. */
import { badRequest } from '../../sdk/index.js';

export function checkPoolName(name: unknown): string {
  if (typeof name !== 'string' || name === '') throw badRequest('No name provided');
  if (name.includes('/')) throw badRequest('Storage pool names may not contain slashes');
  if (/\s/.test(name)) throw badRequest('Storage pool names may not contain white space');
  if (name === '.' || name === '..') throw badRequest(`Invalid storage pool name "${name}"`);
  // Control characters would end up in paths and logs.
  if (/[\u0000-\u001f\u007f]/.test(name)) throw badRequest('Storage pool names may not contain control characters');
  if (Buffer.byteLength(name) > 200) throw badRequest('Storage pool name is too long (maximum 200 bytes)');
  return name;
}
