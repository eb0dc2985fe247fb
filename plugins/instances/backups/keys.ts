/** The server key choosing how new backups are compressed (the reference's `backup_compression`). */
import type { ConfigKeyDescriptor } from '../../../sdk/index.js';
import { ALGORITHMS, validateAlgorithm } from './compression.js';

export const BACKUP_SERVER_KEYS: ConfigKeyDescriptor[] = [
  {
    key: 'backups.compression_algorithm',
    scope: 'server',
    type: 'string',
    default: 'gzip',
    live: true,
    validate: validateAlgorithm,
    extension: 'backup_compression',
    doc: `Compression of new instance backups when the request names none: ${ALGORITHMS.join(', ')}`,
  },
];
