/** Project names: what the reference refuses, plus what `?project=` could not carry. */
import { badRequest } from '../../sdk/index.js';

/**
 * The reference refuses empty names, `/`, spaces, `_` (the dir layout joins project and volume with
 * it), quotes, `*` and the dot names. corral also refuses the characters the kernel refuses in
 * `?project=` and names over 63 characters, so that every project it creates can be addressed.
 */
export function checkProjectName(name: unknown): string {
  if (name === undefined || name === null || name === '') throw badRequest('No name provided');
  if (typeof name !== 'string') throw badRequest('The project name must be a string');
  if (name.includes('/')) throw badRequest('Project names may not contain slashes');
  if (/\s/.test(name)) throw badRequest('Project names may not contain spaces');
  if (name.includes('_')) throw badRequest('Project names may not contain underscores');
  if (/['"]/.test(name)) throw badRequest('Project names may not contain quotes');
  if (name === '*') throw badRequest(`"${name}" is a reserved project name`);
  if (name === '.' || name === '..') throw badRequest(`Invalid project name "${name}"`);
  if (/[\\?&#%*<>|]/.test(name)) throw badRequest(`Project names may not contain any of \\ ? & # % * < > |`);
  if (name.length > 63) throw badRequest('Project names may have at most 63 characters');
  return name;
}
