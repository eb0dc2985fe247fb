/** The server key choosing how new backups are compressed (the reference's `backup_compression`). */
import { type ConfigKeyDescriptor } from '../../../sdk/index.js';
import { BACKUP_COMPRESSION_KEY } from '../../../sdk/lib/backup/index.js';

export const BACKUP_SERVER_KEYS: ConfigKeyDescriptor[] = [BACKUP_COMPRESSION_KEY];
