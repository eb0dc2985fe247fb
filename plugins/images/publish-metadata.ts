/**
 * The metadata.yaml of a published image. As the reference does: the source's own file goes in
 * unchanged unless the request sets properties (which replace the file's) or an expiry; then a
 * copy with those changed goes in, keeping everything else (creation_date included). A source
 * without the file gets a new one: architecture, now as creation_date, the properties.
 */
import { lstat, readFile, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { yaml } from '../../sdk/lib/yaml/index.js';
import { badRequest, isPlainObject, type ImageSourceContent } from '../../sdk/index.js';

export interface MetadataRequest {
  /** Undefined: keep the source's. */
  properties?: Record<string, string>;
  /** ISO time; undefined: keep the source's. */
  expiresAt?: string;
}

export interface PublishedMetadata {
  /** Directory whose metadata.yaml goes into the image. */
  dir: string;
  properties: Record<string, string>;
  /** Unix seconds; 0 when the image never expires. */
  expiryDate: number;
}

const unixSeconds = (iso: string) => Math.floor(Date.parse(iso) / 1000);

/** Scalars as strings (`release: 22.04` is a number to YAML); nested values are not properties. */
function scalarMap(value: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!isPlainObject(value)) return out;
  for (const [k, v] of Object.entries(value)) {
    if (v !== null && v !== undefined && typeof v !== 'object') out[k] = String(v);
  }
  return out;
}

async function sourceFile(dir: string): Promise<{ text: string; mtime: Date } | undefined> {
  const file = path.join(dir, 'metadata.yaml');
  const info = await lstat(file).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
  if (!info) return undefined;
  // Never follow a link out of the volume into the host.
  if (!info.isFile()) throw badRequest('The metadata.yaml of the source is not a regular file');
  return { text: (await readFile(file)).toString('utf8'), mtime: info.mtime };
}

export async function publishedMetadata(content: ImageSourceContent, wanted: MetadataRequest, scratch: string, now: Date): Promise<PublishedMetadata> {
  const expiry = wanted.expiresAt ? unixSeconds(wanted.expiresAt) : undefined;
  const own = await sourceFile(content.dir);
  if (own === undefined) {
    const properties = wanted.properties ?? content.properties;
    await writeFile(path.join(scratch, 'metadata.yaml'), yaml().stringify({
      architecture: content.architecture,
      creation_date: Math.floor(now.getTime() / 1000),
      expiry_date: expiry ?? 0,
      properties,
      templates: {},
    }));
    return { dir: scratch, properties, expiryDate: expiry ?? 0 };
  }

  const doc = yaml().parseDocument(own.text);
  if (doc.errors.length) throw badRequest(`The metadata.yaml of the source is not valid YAML: ${doc.errors[0]!.message.split('\n')[0]}`);
  const parsed: unknown = doc.toJS();
  if (!isPlainObject(parsed)) throw badRequest('The metadata.yaml of the source is not a map');
  const ownExpiry = Number(parsed.expiry_date);
  const result = {
    properties: wanted.properties ?? scalarMap(parsed.properties),
    expiryDate: expiry ?? (Number.isInteger(ownExpiry) && ownExpiry > 0 ? ownExpiry : 0),
  };
  // Whatever imports the image needs these two; a file edited without them gets them filled in.
  const creation = Number(parsed.creation_date);
  const incomplete = typeof parsed.architecture !== 'string' || !parsed.architecture || !Number.isInteger(creation) || creation <= 0;
  if (wanted.properties === undefined && expiry === undefined && !incomplete) return { dir: content.dir, ...result };

  if (typeof parsed.architecture !== 'string' || !parsed.architecture) doc.set('architecture', content.architecture);
  if (!Number.isInteger(creation) || creation <= 0) doc.set('creation_date', Math.floor(now.getTime() / 1000));
  if (expiry !== undefined) doc.set('expiry_date', expiry);
  if (wanted.properties !== undefined) doc.set('properties', doc.createNode(wanted.properties));
  const rewritten = path.join(scratch, 'metadata.yaml');
  await writeFile(rewritten, doc.toString());
  // The same request on unchanged content packs to the same bytes, so it is found a duplicate.
  await utimes(rewritten, own.mtime, own.mtime);
  return { dir: scratch, ...result };
}
