/**
 * POST /1.0/instances takes JSON (create, copy) or, with `Content-Type: application/octet-stream`,
 * a backup tarball to import. The route reads its body itself for that: this wraps the JSON
 * handler into a raw-body verb that dispatches on the content type.
 */
import { type PluginContext, type VerbSpec } from '../../../sdk/index.js';
import { acceptingBackupUploads } from '../../../sdk/lib/backup/index.js';
import type { InstanceManager } from '../manager.js';
import { BackupImporter } from './import.js';

export function acceptBackupUploads(ctx: PluginContext, manager: InstanceManager, json: VerbSpec): VerbSpec {
  const importer = new BackupImporter(ctx, manager);
  return acceptingBackupUploads(json, (req) => importer.post(req));
}
