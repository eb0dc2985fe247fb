/**
 * Custom volume and volume snapshot names become directory names and URL segments. The length
 * limit keeps `<project>_<name>` (and a snapshot directory beside it) within a file name's 255 bytes.
 */
import { badRequest } from '../../../sdk/index.js';

export const MAX_VOLUME_NAME = 128;

export function checkVolumeName(name: unknown, what = 'Storage volume'): string {
  if (typeof name !== 'string' || name === '') throw badRequest(`No ${what.toLowerCase()} name provided`);
  if (name.includes('/')) throw badRequest(`${what} names may not contain slashes`);
  if (/\s/.test(name)) throw badRequest(`${what} names may not contain white space`);
  if (name === '.' || name === '..' || name.includes('..')) throw badRequest(`${what} names may not contain ".."`);
  // Control characters would end up in paths and logs.
  if (/[\u0000-\u001f\u007f]/.test(name)) throw badRequest(`${what} names may not contain control characters`);
  if (Buffer.byteLength(name) > MAX_VOLUME_NAME) throw badRequest(`${what} names may be at most ${MAX_VOLUME_NAME} bytes long`);
  return name;
}

export const checkVolumeSnapshotName = (name: unknown): string => checkVolumeName(name, 'Snapshot');
