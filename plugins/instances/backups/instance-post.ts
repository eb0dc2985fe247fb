/**
 * POST /1.0/instances takes JSON (create, copy) or, with `Content-Type: application/octet-stream`,
 * a backup tarball to import. The route reads its body itself for that: this wraps the JSON
 * handler into a raw-body verb that dispatches on the content type.
 */
import type { Readable } from 'node:stream';
import { readJson, type PluginContext, type VerbSpec } from '../../../sdk/index.js';
import type { InstanceManager } from '../manager.js';
import { BackupImporter } from './import.js';

/** Largest backup accepted (the data dir's free space is the practical limit). */
const MAX_BACKUP_BYTES = 1024 ** 4;

export function acceptBackupUploads(ctx: PluginContext, manager: InstanceManager, json: VerbSpec): VerbSpec {
  const importer = new BackupImporter(ctx, manager);
  return {
    ...json,
    rawBody: true,
    maxBytes: MAX_BACKUP_BYTES,
    handler: async (req) => {
      const raw = req.headers['content-type'];
      const mediaType = (Array.isArray(raw) ? raw[0] : raw)?.split(';')[0]?.trim().toLowerCase() ?? '';
      if (mediaType === 'application/octet-stream') return importer.post(req);
      const body = req.rawBody as Readable | undefined;
      try {
        // Any other type is JSON, as the kernel reads bodies whatever their Content-Type (curl -d).
        req.body = body ? await readJson(body.iterator({ destroyOnReturn: false })) : undefined;
      } catch (err) {
        if (body) body.resume();
        throw err;
      }
      return json.handler(req);
    },
  };
}
