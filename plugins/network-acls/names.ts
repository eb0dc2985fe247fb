/** ACL names: they appear in rules' subjects beside addresses and the `@` selectors. */
import { badRequest } from '../../sdk/index.js';

export function checkAclName(name: unknown): string {
  if (typeof name !== 'string' || name === '') throw badRequest('No name provided');
  if (name.length > 63) throw badRequest(`Network ACL name "${name}" is too long (at most 63 characters)`);
  if (name.startsWith('@')) throw badRequest(`Network ACL name "${name}" may not start with "@" (reserved for selectors)`);
  if (!/^[A-Za-z0-9-]+$/.test(name)) throw badRequest(`Network ACL name "${name}" may only contain letters, digits and hyphens`);
  if (/^\d/.test(name)) throw badRequest(`Network ACL name "${name}" may not start with a digit`);
  if (name.startsWith('-') || name.endsWith('-')) throw badRequest(`Network ACL name "${name}" may not start or end with a hyphen`);
  return name;
}
