/**
 * JSON bodies of POST /1.0/images name a source instead of carrying the image. Here push mode is
 * served (its description becomes a grant for the upload that follows); instances and snapshots
 * go to their registered sources (publish.ts); images on other servers are pulled (pull.ts).
 */
import { readFile } from 'node:fs/promises';
import { badRequest, bodyShape, objectBody, readJson as readJsonBody } from '../../sdk/index.js';
import { checkAliasName, stringMap } from './names.js';
import type { PushGrant } from './push-tokens.js';
import { parseClientTime } from './times.js';
import type { StagedUpload } from './upload.js';

const FINGERPRINT = /^[0-9a-f]{64}$/;
const MAX_JSON_BYTES = 1024 * 1024;

/** The sdk's reader, with the 1 MiB cap image requests always had. */
export const readJson = (body: AsyncIterable<Buffer>): Promise<unknown> => readJsonBody(body, MAX_JSON_BYTES);

/** The JSON body of POST /1.0/images: the fields' types, before any source is looked at. */
export const imageCreateBody = objectBody({
  source: bodyShape.object,
  aliases: bodyShape.objects,
  properties: bodyShape.config,
  public: bodyShape.flag,
  auto_update: bodyShape.flag,
  filename: bodyShape.text,
  compression_algorithm: bodyShape.text,
  expires_at: bodyShape.text,
  profiles: bodyShape.names,
});

/** Clients that send JSON without a Content-Type land in the upload path: recognise them. */
export async function stagedJson(upload: StagedUpload): Promise<unknown | undefined> {
  if (upload.rootfsFile || upload.size > MAX_JSON_BYTES) return undefined;
  const text = (await readFile(upload.metadataFile)).toString('utf8');
  if (!text.trimStart().startsWith('{')) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** `aliases` of a JSON body: `[{name, description}]`. */
export function parseAliases(value: unknown): { name: string; description: string }[] {
  if (value !== undefined && value !== null && !Array.isArray(value)) throw badRequest('"aliases" must be a list');
  return ((value ?? []) as unknown[]).map((a) => {
    const entry = (typeof a === 'object' && a !== null ? a : {}) as Record<string, unknown>;
    const description = entry.description ?? '';
    if (typeof description !== 'string') throw badRequest('An alias "description" must be a string');
    return { name: checkAliasName(entry.name), description };
  });
}

/** `expires_at` of a JSON body; undefined when not set. */
export function parseExpiry(value: unknown): string | undefined {
  try {
    return parseClientTime(value);
  } catch (err) {
    throw badRequest(`Invalid "expires_at": ${(err as Error).message}`);
  }
}

/** The push grant a JSON body asks for; throws 400 for anything else. */
export function pushGrantFrom(project: string, body: unknown): PushGrant {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw badRequest('The request body must be a JSON object');
  const b = body as Record<string, any>;
  const source = (b.source ?? {}) as Record<string, any>;
  if (typeof source !== 'object' || Array.isArray(source)) throw badRequest('"source" must be an object');
  if (source.mode !== 'push') refuseSource(source.type);

  const fingerprint = typeof source.fingerprint === 'string' ? source.fingerprint.toLowerCase() : '';
  if (!FINGERPRINT.test(fingerprint)) throw badRequest('Push mode needs the full "fingerprint" of the image in "source"');
  const aliases = parseAliases(b.aliases);
  const expires = parseExpiry(b.expires_at);
  if (b.public !== undefined && typeof b.public !== 'boolean') throw badRequest('"public" must be a boolean');
  if (b.auto_update !== undefined && typeof b.auto_update !== 'boolean') throw badRequest('"auto_update" must be a boolean');
  return {
    project,
    fingerprint,
    aliases,
    expires_at: expires,
    properties: b.properties === undefined || b.properties === null ? undefined : stringMap(b.properties, 'properties'),
    public: b.public === true,
    auto_update: b.auto_update === true,
  };
}

function refuseSource(type: unknown): never {
  switch (type) {
    case undefined:
    case '':
      throw badRequest('The request needs a "source", or an image file as the body');
    case 'instance':
    case 'container':
    case 'virtual-machine':
    case 'snapshot':
      // Only when no plugin registered a source for these types (see sources.ts).
      throw badRequest('Publishing images from instances or snapshots needs the instances plugin, which this build lacks');
    case 'image':
      throw badRequest('An image source needs "server" (and "mode": "pull"); push mode needs "mode": "push"');
    default:
      throw badRequest(`Unknown image source type "${String(type)}"`);
  }
}
