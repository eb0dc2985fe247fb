/**
 * Backup tarball compression: the algorithms a backup may be written with, the tool each one
 * runs, and recognising an uploaded backup by its first bytes (clients name files as they like).
 */
import { badRequest, detectFormat, type HostTools } from '../../../sdk/index.js';

export const ALGORITHMS = ['gzip', 'bzip2', 'xz', 'zstd', 'none'] as const;
export type Algorithm = (typeof ALGORITHMS)[number];

const isAlgorithm = (value: string): value is Algorithm => (ALGORITHMS as readonly string[]).includes(value);

/** Config-key validator: the same names the per-backup field takes. */
export function validateAlgorithm(value: string): void {
  if (!isAlgorithm(value)) throw new Error(`Invalid compression algorithm "${value}" (one of ${ALGORITHMS.join(', ')})`);
}

/** The algorithm of a request, refused with a 400 when unknown or when its tool is not installed. */
export async function checkAlgorithm(hostTools: HostTools, value: string): Promise<Algorithm> {
  if (!isAlgorithm(value)) throw badRequest(`Invalid compression algorithm "${value}"`);
  if (value !== 'none' && !(await hostTools.which(value))) {
    throw badRequest(`Compression algorithm "${value}" needs the "${value}" tool, which is not installed on this host`);
  }
  return value;
}

/** Compressor arguments: to stdout, no file name or time stamp in the header, every core. */
export const compressArgs: Record<Exclude<Algorithm, 'none'>, string[]> = {
  gzip: ['-c', '-n'],
  bzip2: ['-c'],
  xz: ['-c', '-T0'],
  zstd: ['-c', '-q', '-T0'],
};

/** The compression of an uploaded backup; undefined when it is no tarball this daemon reads. */
export async function detectAlgorithm(file: string): Promise<Algorithm | undefined> {
  const format = await detectFormat(file);
  return format?.kind === 'tar' && isAlgorithm(format.compression) ? format.compression : undefined;
}
