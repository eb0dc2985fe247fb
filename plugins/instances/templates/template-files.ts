/**
 * The template files of an instance (`<volume>/templates/<name>`). Names are plain file names;
 * the directory and its files came from an image, so links in it are never followed.
 */
import { closeSync, constants as C, fstatSync, lstatSync, openSync, readFileSync } from 'node:fs';
import { lstat, mkdir, readdir, unlink } from 'node:fs/promises';
import path from 'node:path';
import { badRequest, internalError, notFound } from '../../../sdk/index.js';
import { replaceFile } from './replace-file.js';

/** Largest template accepted through the API. */
export const MAX_TEMPLATE_BYTES = 8 * 1024 * 1024;

/** A plain file name: no directories, no `.`/`..`, nothing hidden in a NUL. */
export function checkTemplateName(name: string | undefined, what = 'Template name'): string {
  if (name === undefined || name === '') throw badRequest('missing path argument');
  if (name.includes('/') || name.includes('\0') || name === '.' || name === '..' || name.length > 255) {
    throw badRequest(`${what} must be a plain file name, not "${name}"`);
  }
  return name;
}

const templatesDir = (volumePath: string) => {
  if (!volumePath) throw internalError('The storage of this instance is not available');
  return path.join(volumePath, 'templates');
};

/**
 * The templates directory if it exists and is a real directory; undefined when missing. Synchronous, as
 * the reads below: one call of microseconds each, where a trip through libuv's thread pool costs a start
 * a fraction of a millisecond on a loaded host.
 */
function existingDir(volumePath: string): string | undefined {
  const dir = templatesDir(volumePath);
  const st = lstatSync(dir, { throwIfNoEntry: false });
  if (!st) return undefined;
  if (!st.isDirectory()) throw internalError('The templates directory of this instance is not a directory');
  return dir;
}

export async function listTemplates(volumePath: string): Promise<string[]> {
  const dir = existingDir(volumePath);
  if (!dir) return [];
  const names: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (entry.isFile() && !entry.name.startsWith('.')) names.push(entry.name);
  }
  return names.sort();
}

export async function readTemplate(volumePath: string, name: string): Promise<Buffer> {
  checkTemplateName(name);
  const dir = existingDir(volumePath);
  if (!dir) throw notFound(`Template "${name}" not found`);
  let fd: number;
  try {
    fd = openSync(path.join(dir, name), C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw notFound(`Template "${name}" not found`);
    if (code === 'ELOOP') throw badRequest(`Template "${name}" is a symbolic link`);
    throw err;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw badRequest(`Template "${name}" is not a regular file`);
    if (st.size > MAX_TEMPLATE_BYTES) throw badRequest(`Template "${name}" is larger than ${MAX_TEMPLATE_BYTES} bytes`);
    return readFileSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Create or replace a template file. */
export async function writeTemplate(volumePath: string, name: string, data: Buffer | AsyncIterable<Buffer>): Promise<void> {
  checkTemplateName(name);
  let dir = existingDir(volumePath);
  if (!dir) {
    dir = templatesDir(volumePath);
    await mkdir(dir, { mode: 0o711 });
  }
  await replaceFile(dir, name, data, MAX_TEMPLATE_BYTES);
}

export async function deleteTemplate(volumePath: string, name: string): Promise<void> {
  checkTemplateName(name);
  const dir = existingDir(volumePath);
  if (!dir) throw notFound(`Template "${name}" not found`);
  const target = path.join(dir, name);
  const st = await lstat(target).catch(() => undefined);
  if (!st) throw notFound(`Template "${name}" not found`);
  if (st.isDirectory()) throw badRequest(`Template "${name}" is a directory`);
  await unlink(target);
}
