/**
 * The generic steps of importing a backup tarball (instances and custom volumes): store the
 * upload, recognise its compression, walk the whole archive in-process once before anything is
 * extracted (framing, checksums, the compressor's own check, and the caller's rules about member
 * names), extract it into a private work area, and move the extracted trees into a new volume.
 * Which members an archive may hold is the caller's: it differs between instances and volumes.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { readdir, rename, stat } from 'node:fs/promises';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { checkBackupAlgorithm, detectBackupAlgorithm, type BackupAlgorithm } from './compression.js';
import { badRequest, internalError, isApiError } from '../../errors.js';
import { checkShape } from '../../body-shape.js';
import { tarFlags } from '../archive/file-format.js';
import type { HostTools } from '../../host-tools.js';
import { readJson } from '../../json-request.js';
import { drain } from '../http-body/raw-body.js';
import type { ApiResponse } from '../../responses.js';
import type { ApiRequest, VerbSpec } from '../../routes.js';
import { TarWalker, type TarEntry } from '../archive/tar-walk.js';

const DAY_MS = 24 * 3600_000;

export const invalidBackup = (why: string) => badRequest(`Invalid backup: ${why}`);

/** Name components of a member; throws on absolute names and `..`. Empty and `.` components are what tar drops too. */
export function backupMemberParts(name: string, what = 'member'): string[] {
  if (name.startsWith('/')) throw invalidBackup(`${what} "${name}" is an absolute path`);
  const parts = name.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) throw invalidBackup(`${what} "${name}" contains ".."`);
  return parts;
}

/** Store the request body in `file`; a broken upload is a 400 (the rest of the body is read first). */
export async function receiveBackupUpload(body: NodeJS.ReadableStream | undefined, file: string): Promise<void> {
  if (!body) throw badRequest('The request has no body');
  try {
    await pipeline(body as Readable, createWriteStream(file, { mode: 0o600 }));
  } catch (err) {
    await drain(body);
    throw badRequest(`The backup upload was interrupted (${(err as Error).message})`);
  }
}

/** The compression of a stored upload; a 400 when it is empty, no tarball, or needs a tool not installed. */
export async function backupUploadAlgorithm(hostTools: HostTools, file: string): Promise<BackupAlgorithm> {
  if ((await stat(file)).size === 0) throw invalidBackup('the body is empty');
  const detected = await detectBackupAlgorithm(file);
  if (!detected) throw invalidBackup('not a tar archive (plain, or compressed with gzip, bzip2, xz or zstd)');
  return checkBackupAlgorithm(hostTools, detected);
}

/**
 * Decompress and walk the whole archive. `check` sees every member in order (and throws a 400 to
 * refuse it), answering true for those whose content `collect` should get (small YAML files).
 */
export async function walkBackupArchive(
  hostTools: HostTools, file: string, algorithm: BackupAlgorithm,
  check: (entry: TarEntry) => boolean, collect: (entry: TarEntry, content: Buffer) => void,
): Promise<void> {
  const walker = new TarWalker('backup', check, collect);
  if (algorithm === 'none') {
    for await (const chunk of createReadStream(file)) walker.push(chunk as Buffer);
    walker.finish();
    return;
  }
  const child = hostTools.spawn(algorithm, ['-d', '-c', '--', file]);
  child.stdin.end();
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => {
    if (stderr.length < 4096) stderr += c.toString('utf8');
  });
  try {
    for await (const chunk of child.stdout) walker.push(chunk as Buffer);
  } catch (err) {
    child.kill('SIGKILL');
    await child.exited;
    throw isApiError(err) ? err : invalidBackup(`reading the archive failed: ${(err as Error).message}`);
  }
  const code = await child.exited;
  if (code !== 0) throw invalidBackup(`the ${algorithm} stream is damaged or truncated (${stderr.trim().split('\n').pop() || `exit ${code}`})`);
  walker.finish();
}

export interface ExtractOptions {
  upload: string;
  algorithm: BackupAlgorithm;
  /** An empty private directory. */
  into: string;
  signal: AbortSignal;
  /** Compressed bytes read so far, and the upload's size. */
  onProgress?: (read: number, total: number) => void;
}

/** Extract a checked archive with owners, modes and extended attributes as archived. */
export async function extractBackup(hostTools: HostTools, opts: ExtractOptions): Promise<void> {
  const total = (await stat(opts.upload)).size;
  let read = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      read += chunk.length;
      opts.onProgress?.(read, total);
      done(null, chunk);
    },
  });
  const tar = hostTools.spawn('tar', [
    '-x', '-f', '-', ...tarFlags(opts.algorithm), '-C', opts.into, '--numeric-owner', '--same-owner', '--same-permissions',
    '--xattrs', '--xattrs-include=*',
  ], { endWithDaemon: true });
  let stderr = '';
  tar.stderr?.on('data', (c: Buffer) => {
    if (stderr.length < 16 * 1024) stderr += c.toString('utf8');
  });
  const kill = () => tar.kill('SIGKILL');
  opts.signal.addEventListener('abort', kill, { once: true });
  try {
    const [fed, code] = await Promise.allSettled([pipeline(createReadStream(opts.upload), counter, tar.stdin), tar.exited]);
    if (opts.signal.aborted) throw internalError('The restore was cancelled');
    const exit = (code as PromiseFulfilledResult<number>).value;
    if (exit !== 0) throw internalError(`Extracting the backup failed (tar exit ${exit}): ${stderr.trim().split('\n').slice(-3).join(' ')}`);
    if (fed.status === 'rejected') throw internalError(`Extracting the backup failed: ${(fed.reason as Error).message}`);
  } finally {
    opts.signal.removeEventListener('abort', kill);
  }
}

/** Move an extracted part's entries into a new volume's directory; across filesystems, copy them. */
export async function moveBackupTree(hostTools: HostTools, from: string, dir: string, skip: readonly string[] = []): Promise<void> {
  for (const entry of await readdir(from)) {
    if (skip.includes(entry)) continue;
    await moveBackupEntry(hostTools, path.join(from, entry), path.join(dir, entry));
  }
}

/** Move one extracted entry into place: renamed, or copied across file systems with its holes kept (a VM's disk). */
export async function moveBackupEntry(hostTools: HostTools, source: string, target: string): Promise<void> {
  try {
    await rename(source, target);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EXDEV') throw err;
    await hostTools.run('cp', ['-a', '--sparse=always', '--', source, target], { timeoutMs: DAY_MS, endWithDaemon: true });
  }
}

/**
 * What tar must not be led into while extracting: members below a symlink or a file the archive
 * itself planted, a symlink redefined, hard links that leave their part of the archive or point at
 * something not archived before them. Callers add the rules about which names may appear.
 */
export class BackupMemberTracker {
  private readonly symlinks = new Set<string>();
  private readonly nonDirs = new Set<string>();
  private readonly seen = new Set<string>();

  /** Throws when the member `parts` would be written through something the archive made. */
  checkPlace(parts: string[]): void {
    const name = parts.join('/');
    for (let i = 1; i < parts.length; i++) {
      const ancestor = parts.slice(0, i).join('/');
      if (this.symlinks.has(ancestor)) throw invalidBackup(`member "${name}" is below the symlink "${ancestor}"`);
      if (this.nonDirs.has(ancestor)) throw invalidBackup(`member "${name}" is below the file "${ancestor}"`);
    }
    if (this.symlinks.has(name)) throw invalidBackup(`member "${name}" replaces a symlink of the archive`);
  }

  /** A hard link must point at a file archived before it, in the same part (`partOf` names parts). */
  checkHardLink(name: string, linkname: string, part: string, partOf: (parts: string[]) => string | undefined): void {
    if (!linkname) throw invalidBackup(`hard link "${name}" has no target`);
    const target = backupMemberParts(linkname, 'hard link target');
    const targetName = target.join('/');
    if (target[0] !== 'backup' || partOf(target) !== part) throw invalidBackup(`hard link "${name}" points outside its part of the archive ("${linkname}")`);
    for (let i = 1; i < target.length; i++) {
      const ancestor = target.slice(0, i).join('/');
      if (this.symlinks.has(ancestor)) throw invalidBackup(`hard link "${name}" points below the symlink "${ancestor}"`);
    }
    if (!this.seen.has(targetName) || !this.nonDirs.has(targetName)) throw invalidBackup(`hard link "${name}" points at "${linkname}", which is not a file archived before it`);
  }

  /** Remember an accepted member. */
  record(parts: string[], type: string): void {
    const name = parts.join('/');
    if (type === '2') this.symlinks.add(name);
    if (type !== '5') this.nonDirs.add(name);
    this.seen.add(name);
  }
}

/** Largest backup accepted (the data dir's free space is the practical limit). */
export const MAX_BACKUP_BYTES = 1024 ** 4;

/**
 * A JSON verb that also takes a backup tarball with `Content-Type: application/octet-stream`
 * (POST /1.0/instances, POST /volumes/custom): the route reads its body itself, dispatching on
 * the content type. Any other type is JSON, as the kernel reads bodies whatever their type (curl -d).
 */
export function acceptingBackupUploads(json: VerbSpec, upload: (req: ApiRequest) => Promise<ApiResponse>): VerbSpec {
  return {
    ...json,
    rawBody: true,
    maxBytes: MAX_BACKUP_BYTES,
    handler: async (req) => {
      const raw = req.headers['content-type'];
      const mediaType = (Array.isArray(raw) ? raw[0] : raw)?.split(';')[0]?.trim().toLowerCase() ?? '';
      if (mediaType === 'application/octet-stream') return upload(req);
      const body = req.rawBody as Readable | undefined;
      try {
        req.body = body ? await readJson(body.iterator({ destroyOnReturn: false })) : undefined;
      } catch (err) {
        if (body) body.resume();
        throw err;
      }
      // The kernel checks declared shapes only of bodies it reads itself: this one is read here.
      if (json.body) req.body = checkShape(json.body, req.body, 'request body');
      return json.handler(req);
    },
  };
}
