/**
 * The optimized parts of a backup (instances and custom volumes): the pool driver's own streams,
 * one file per part in the archive, as the reference lays them out (`<snapshots dir>/<name>.bin`
 * oldest first, then `<volume>.bin`), and the driver's description of them in
 * `backup/optimized_header.yaml`. Streams are written to files of the caller's work area first
 * (the tarball takes files of known size), then bound into the archive.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { copyFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { yaml } from '../yaml/index.js';
import type { BackupTarballPart } from './tarball.js';
import { badRequest } from '../../errors.js';
import type { OptimizedPart, StorageService, VolumeRef } from '../../storage.js';

export interface OptimizedLayout {
  /** Member of a snapshot's stream, e.g. `backup/snapshots/<name>.bin`. */
  snapshot: (name: string) => string;
  /** Member of the volume's stream, e.g. `backup/container.bin`. */
  volume: string;
}

export const OPTIMIZED_HEADER_MEMBER = 'backup/optimized_header.yaml';

/** Member name of a part in `layout`. */
export const optimizedMember = (layout: OptimizedLayout, part: OptimizedPart) => (part === undefined ? layout.volume : layout.snapshot(part));

export interface OptimizedParts {
  parts: BackupTarballPart[];
  /** File holding optimized_header.yaml, when the driver describes its parts. */
  header?: string;
}

/**
 * Have the pool's driver send the volume's parts into files of `work`; the tarball parts in archive
 * order. `volumeFiles` are added to the volume's part (host file -> name in the volume).
 */
export async function sendOptimizedParts(
  storage: Pick<StorageService, 'sendVolume'>, pool: string, vol: VolumeRef, snapshots: string[], work: string, layout: OptimizedLayout,
  volumeFiles: Record<string, string> = {},
): Promise<OptimizedParts> {
  const parts: BackupTarballPart[] = [];
  const header = await storage.sendVolume(pool, vol, snapshots, async (part, stream) => {
    const file = path.join(work, `part-${parts.length}.bin`);
    await pipeline(stream, createWriteStream(file, { mode: 0o600 }));
    parts.push({ member: optimizedMember(layout, part), file });
  }, async (dir) => {
    for (const [name, from] of Object.entries(volumeFiles)) await copyFile(from, path.join(dir, name));
  });
  if (header === undefined) return { parts };
  const file = path.join(work, 'optimized_header.yaml');
  await writeFile(file, yaml().stringify(header, { lineWidth: 0, indentSeq: false }), { mode: 0o600 });
  return { parts, header: file };
}

/** The parts of an extracted optimized backup under `root` (the directory holding `backup/`), opened as the driver asks for them. */
export function openOptimizedPart(root: string, layout: OptimizedLayout): (part: OptimizedPart) => Promise<Readable> {
  return async (part) => createReadStream(path.join(root, optimizedMember(layout, part)));
}

/**
 * An optimized backup is received only by a pool whose driver writes the same format: a 400
 * otherwise, before anything is made (`format`: the target pool's, undefined when it has none).
 */
export function checkOptimizedTarget(backend: string, pool: string, format: string | undefined): void {
  if (format === backend) return;
  throw badRequest(
    `The backup is in the optimized format of storage driver "${backend}"; storage pool "${pool}" ` +
    `${format ? `takes only "${format}" streams` : 'has no optimized format'}: import it into a pool of driver "${backend}"`,
  );
}
