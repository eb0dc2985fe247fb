/** Network names become host interface names: the kernel's limits apply. */
import { badRequest } from '../../sdk/index.js';

export function checkNetworkName(name: unknown): string {
  if (typeof name !== 'string' || name === '') throw badRequest('No name provided');
  if (name.length > 15) throw badRequest(`Network name "${name}" is too long (a host interface name has at most 15 characters)`);
  if (name === '.' || name === '..') throw badRequest(`Invalid network name "${name}"`);
  if (/[\s/:]/.test(name) || /[\u0000-\u001f\u007f]/.test(name)) {
    throw badRequest(`Network name "${name}" may not contain slashes, colons, white space or control characters`);
  }
  if (name.startsWith('-')) throw badRequest(`Network name "${name}" may not start with a dash`);
  return name;
}
