/**
 * Backup tarball compression (instance and custom volume backups): the algorithms a backup may be
 * written with, the tool each one runs, the server key choosing the default, and recognising an
 * uploaded backup by its first bytes (clients name files as they like).
 */
import type { ConfigKeyDescriptor } from '../../config-keys.js';
import { badRequest } from '../../errors.js';
import { detectFormat } from '../archive/file-format.js';
import type { HostTools } from '../../host-tools.js';

export const BACKUP_ALGORITHMS = ['gzip', 'bzip2', 'xz', 'zstd', 'none'] as const;
export type BackupAlgorithm = (typeof BACKUP_ALGORITHMS)[number];

const isAlgorithm = (value: string): value is BackupAlgorithm => (BACKUP_ALGORITHMS as readonly string[]).includes(value);

/** Config-key validator: the same names the per-backup field takes. */
export function validateBackupAlgorithm(value: string): void {
  if (!isAlgorithm(value)) throw new Error(`Invalid compression algorithm "${value}" (one of ${BACKUP_ALGORITHMS.join(', ')})`);
}

/** The algorithm of a request, refused with a 400 when unknown or when its tool is not installed. */
export async function checkBackupAlgorithm(hostTools: HostTools, value: string): Promise<BackupAlgorithm> {
  if (!isAlgorithm(value)) throw badRequest(`Invalid compression algorithm "${value}"`);
  if (value !== 'none' && !(await hostTools.which(value))) {
    throw badRequest(`Compression algorithm "${value}" needs the "${value}" tool, which is not installed on this host`);
  }
  return value;
}

/** Compressor arguments: to stdout, no file name or time stamp in the header, every core. */
export const backupCompressArgs: Record<Exclude<BackupAlgorithm, 'none'>, string[]> = {
  gzip: ['-c', '-n'],
  bzip2: ['-c'],
  xz: ['-c', '-T0'],
  zstd: ['-c', '-q', '-T0'],
};

/** The compression of an uploaded backup; undefined when it is no tarball this daemon reads. */
export async function detectBackupAlgorithm(file: string): Promise<BackupAlgorithm | undefined> {
  const format = await detectFormat(file);
  return format?.kind === 'tar' && isAlgorithm(format.compression) ? format.compression : undefined;
}

/**
 * The server key choosing how new backups are compressed (the reference's `backup_compression`).
 * Both the instances and the storage family use it; whichever loads first registers it.
 */
export const BACKUP_COMPRESSION_KEY: ConfigKeyDescriptor = {
  key: 'backups.compression_algorithm',
  scope: 'server',
  type: 'string',
  default: 'gzip',
  live: true,
  validate: validateBackupAlgorithm,
  extension: 'backup_compression',
  doc: `Compression of new instance and volume backups when the request names none: ${BACKUP_ALGORITHMS.join(', ')}`,
};
