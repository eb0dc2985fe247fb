/** The JSON body of `POST /1.0/images` that publishes an instance or snapshot, checked before any work. */
import { badRequest, isPlainObject, type HostTools } from '../../sdk/index.js';
import { resolveCompressor, type Compressor } from './compressors.js';
import type { NewAlias } from './install.js';
import { parseAliases, parseExpiry } from './json-request.js';
import { stringMap } from './names.js';

export interface PublishRequest {
  source: Record<string, unknown>;
  compressor: Compressor;
  aliases: NewAlias[];
  /** Undefined: the source's own; given (even empty): replaces them, as the reference does. */
  properties?: Record<string, string>;
  public: boolean;
  /** ISO time; undefined: the source's own expiry, if any. */
  expiresAt?: string;
  filename: string;
}

/** `serverCompression` is the `images.compression_algorithm` server setting. */
export async function parsePublishRequest(tools: HostTools, body: Record<string, unknown>, serverCompression: string): Promise<PublishRequest> {
  const source = body.source;
  if (!isPlainObject(source)) throw badRequest('"source" must be an object');
  if (typeof source.name !== 'string' || source.name === '') throw badRequest(`An image source of type "${String(source.type)}" needs a "name"`);
  if (body.public !== undefined && body.public !== null && typeof body.public !== 'boolean') throw badRequest('"public" must be a boolean');
  if (body.auto_update !== undefined && body.auto_update !== null && typeof body.auto_update !== 'boolean') throw badRequest('"auto_update" must be a boolean');
  if (body.filename !== undefined && body.filename !== null && typeof body.filename !== 'string') throw badRequest('"filename" must be a string');
  return {
    source,
    aliases: parseAliases(body.aliases),
    properties: body.properties === undefined || body.properties === null ? undefined : stringMap(body.properties, 'properties'),
    public: body.public === true,
    expiresAt: parseExpiry(body.expires_at),
    filename: (body.filename as string | undefined) ?? '',
    compressor: await resolveCompressor(tools, body.compression_algorithm, serverCompression),
  };
}
