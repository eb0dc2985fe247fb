/**
 * The stored form of an instance backup, in the `backups` collection under `<instance>/<backup>`;
 * the tarball itself is a file under `<dataDir>/backups/instances/` (see files.ts).
 */
export interface BackupRecord {
  name: string;
  created_at: string;
  /** `0001-01-01T00:00:00Z` when it never expires. */
  expires_at: string;
  instance_only: boolean;
  container_only: boolean;
  optimized_storage: boolean;
  compression_algorithm: string;
}

export { BACKUP_NO_EXPIRY as NO_EXPIRY } from '../../../sdk/lib/backup/index.js';

export const backupKey = (instance: string, backup: string) => `${instance}/${backup}`;

/** The wire form (the reference shows neither the compression nor the file). */
export function backupView(record: BackupRecord) {
  return {
    name: record.name,
    created_at: record.created_at,
    expires_at: record.expires_at,
    instance_only: record.instance_only,
    container_only: record.container_only,
    optimized_storage: record.optimized_storage,
  };
}

/** Backups list in name order, as the reference lists them. */
export const byName = (a: { doc: BackupRecord }, b: { doc: BackupRecord }) => (a.doc.name < b.doc.name ? -1 : a.doc.name > b.doc.name ? 1 : 0);
