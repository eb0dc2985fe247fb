/**
 * Backup tarball compression: the algorithms a backup may be written with, the tool each one
 * runs, and recognising an uploaded backup by its first bytes (clients name files as they like).
 */
import { open } from 'node:fs/promises';
import { badRequest, type HostTools } from '../../../sdk/index.js';

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

/** tar's own option for reading each compression. */
export const tarReadFlags: Record<Algorithm, string[]> = {
  gzip: ['-z'], bzip2: ['-j'], xz: ['-J'], zstd: ['--zstd'], none: [],
};

export const fileExtension: Record<Algorithm, string> = {
  gzip: '.tar.gz', bzip2: '.tar.bz2', xz: '.tar.xz', zstd: '.tar.zst', none: '.tar',
};

const MAGICS: { bytes: number[]; offset?: number; algorithm: Algorithm }[] = [
  { bytes: [0x1f, 0x8b], algorithm: 'gzip' },
  { bytes: [0x42, 0x5a, 0x68], algorithm: 'bzip2' },
  { bytes: [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00], algorithm: 'xz' },
  { bytes: [0x28, 0xb5, 0x2f, 0xfd], algorithm: 'zstd' },
  // A plain tar carries "ustar" in its first header.
  { bytes: [0x75, 0x73, 0x74, 0x61, 0x72], offset: 257, algorithm: 'none' },
];

/** The compression of an uploaded backup; undefined when it is no tarball this daemon reads. */
export async function detectAlgorithm(file: string): Promise<Algorithm | undefined> {
  const fh = await open(file, 'r');
  try {
    const head = Buffer.alloc(512);
    const { bytesRead } = await fh.read(head, 0, head.length, 0);
    const bytes = head.subarray(0, bytesRead);
    return MAGICS.find((m) => m.bytes.every((b, i) => bytes[(m.offset ?? 0) + i] === b))?.algorithm;
  } finally {
    await fh.close();
  }
}
