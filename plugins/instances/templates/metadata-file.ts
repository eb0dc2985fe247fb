/**
 * An instance's copy of its image metadata (`<volume>/metadata.yaml`): reading it leniently,
 * checking an edit, writing it back atomically. The volume holds what an image unpacked, so
 * nothing here follows a symlink.
 */
import { closeSync, constants as C, fstatSync, openSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { yaml } from '../../../sdk/lib/yaml/index.js';
import { badRequest, internalError, isPlainObject } from '../../../sdk/index.js';
import { checkTemplateName } from './template-files.js';
import { replaceFile } from './replace-file.js';

export interface TemplateSpec {
  when: string[] | null;
  create_only: boolean;
  template: string;
  properties: Record<string, string> | null;
  /** Owner and mode of the written file (later image format; the 5.0 reference ignores them). */
  uid?: string;
  gid?: string;
  mode?: string;
}

/** The wire shape; `null` where metadata.yaml has nothing, as the reference answers. */
export interface InstanceMetadata {
  architecture: string;
  creation_date: number;
  expiry_date: number;
  properties: Record<string, string> | null;
  templates: Record<string, TemplateSpec> | null;
}

export const EMPTY_METADATA: InstanceMetadata = { architecture: '', creation_date: 0, expiry_date: 0, properties: null, templates: null };

export const metadataFile = (volumePath: string) => path.join(volumePath, 'metadata.yaml');

// ---------------------------------------------------------------------------------------------
// Reading what is on disk: images were checked at import, edits at PUT; be lenient with scalars.

function looseMap(v: unknown): Record<string, string> | null {
  if (!isPlainObject(v)) return null;
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(v)) if (x !== null && x !== undefined && typeof x !== 'object') out[k] = String(x);
  return out;
}

function looseTemplates(v: unknown): Record<string, TemplateSpec> | null {
  if (!isPlainObject(v)) return null;
  const out: Record<string, TemplateSpec> = {};
  for (const [target, spec] of Object.entries(v)) {
    if (!isPlainObject(spec)) continue;
    out[target] = {
      when: Array.isArray(spec.when) ? spec.when.map(String) : null,
      create_only: spec.create_only === true,
      template: typeof spec.template === 'string' ? spec.template : '',
      properties: looseMap(spec.properties),
      ...ownership(spec, (x) => String(x)),
    };
  }
  return out;
}

function ownership(spec: Record<string, unknown>, as: (x: unknown, field: string) => string): Pick<TemplateSpec, 'uid' | 'gid' | 'mode'> {
  const out: Pick<TemplateSpec, 'uid' | 'gid' | 'mode'> = {};
  for (const field of ['uid', 'gid', 'mode'] as const) {
    if (spec[field] !== undefined && spec[field] !== null && spec[field] !== '') out[field] = as(spec[field], field);
  }
  return out;
}

const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? Math.trunc(v) : Number.isFinite(Number(v)) ? Math.trunc(Number(v)) : 0);

/**
 * Parsed metadata by its text. Every new instance has its own copy of its image's metadata.yaml, so a
 * cache by file would miss at each first start; parsing the YAML is most of a start's templates
 * (~2.5 ms of the event loop for the busybox image's), reading the small file microseconds. Few texts
 * recur (one per image, and edits), so a small bound is enough.
 */
const parsedByText = new Map<string, InstanceMetadata>();
const PARSED_MAX = 64;
/** A larger text (an edit can make one) is parsed each time rather than kept. */
const CACHED_TEXT_MAX = 64 * 1024;

/**
 * The instance's metadata; the empty shape when the volume has no metadata.yaml. Read with synchronous
 * calls: a small file on the instance's own volume, read at every start, where four trips through
 * libuv's thread pool cost ~2 ms of the start on a loaded host and the calls themselves microseconds.
 */
export async function readMetadata(volumePath: string): Promise<InstanceMetadata> {
  if (!volumePath) throw internalError('The storage of this instance is not available');
  const file = metadataFile(volumePath);
  let fd: number;
  try {
    // Not following a link, and not waiting on a FIFO put in its place.
    fd = openSync(file, C.O_RDONLY | C.O_NOFOLLOW | C.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return structuredClone(EMPTY_METADATA);
    if (code === 'ELOOP') throw internalError('metadata.yaml is a symbolic link');
    throw err;
  }
  let text: string;
  try {
    if (!fstatSync(fd).isFile()) throw internalError('metadata.yaml is not a regular file');
    text = readFileSync(fd, 'utf8');
  } finally {
    closeSync(fd);
  }
  const cached = parsedByText.get(text);
  if (cached) return structuredClone(cached);
  const value = parseMetadata(text);
  if (text.length > CACHED_TEXT_MAX) return value;
  if (parsedByText.size >= PARSED_MAX) parsedByText.delete(parsedByText.keys().next().value!);
  parsedByText.set(text, structuredClone(value));
  return value;
}

function parseMetadata(text: string): InstanceMetadata {
  let doc: unknown;
  try {
    doc = yaml().parse(text);
  } catch (err) {
    throw internalError(`metadata.yaml is not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  if (doc === null || doc === undefined) return structuredClone(EMPTY_METADATA);
  if (!isPlainObject(doc)) throw internalError('metadata.yaml is not a map');
  return {
    architecture: doc.architecture === undefined || doc.architecture === null ? '' : String(doc.architecture),
    creation_date: num(doc.creation_date),
    expiry_date: num(doc.expiry_date),
    properties: looseMap(doc.properties),
    templates: looseTemplates(doc.templates),
  };
}

// ---------------------------------------------------------------------------------------------
// Checking an edit (PUT, or PATCH merged by the kernel): wrong types are the client's (400).

function stringField(v: unknown, what: string): string {
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') throw badRequest(`"${what}" must be a string`);
  return v;
}

function dateField(v: unknown, what: string): number {
  if (v === undefined || v === null) return 0;
  if (typeof v !== 'number' || !Number.isInteger(v)) throw badRequest(`"${what}" must be a whole number (Unix time)`);
  return v;
}

function stringMapField(v: unknown, what: string): Record<string, string> | null {
  if (v === undefined || v === null) return null;
  if (!isPlainObject(v)) throw badRequest(`"${what}" must be a map of strings`);
  for (const [k, x] of Object.entries(v)) if (typeof x !== 'string') throw badRequest(`"${what}.${k}" must be a string`);
  return { ...(v as Record<string, string>) };
}

function templateField(target: string, v: unknown): TemplateSpec {
  const at = `templates.${target}`;
  if (!target) throw badRequest('A template needs a target path');
  if (!isPlainObject(v)) throw badRequest(`"${at}" must be a map`);
  if (v.when !== undefined && v.when !== null && (!Array.isArray(v.when) || v.when.some((w) => typeof w !== 'string'))) {
    throw badRequest(`"${at}.when" must be a list of strings`);
  }
  if (v.create_only !== undefined && v.create_only !== null && typeof v.create_only !== 'boolean') throw badRequest(`"${at}.create_only" must be a boolean`);
  const template = stringField(v.template, `${at}.template`);
  if (template) checkTemplateName(template, `"${at}.template"`);
  const spec: TemplateSpec = {
    when: Array.isArray(v.when) ? [...(v.when as string[])] : null,
    create_only: v.create_only === true,
    template,
    properties: stringMapField(v.properties, `${at}.properties`),
    ...ownership(v, (x, field) => {
      const s = typeof x === 'number' ? String(x) : x;
      if (typeof s !== 'string') throw badRequest(`"${at}.${field}" must be a string`);
      return s;
    }),
  };
  ownerOf(spec, target);
  return spec;
}

/** Check a PUT body; unknown top-level fields are ignored (clients echo what they read). */
export function metadataFromBody(body: unknown): InstanceMetadata {
  if (!isPlainObject(body)) throw badRequest('The request body must be the image metadata (a JSON object)');
  let templates: Record<string, TemplateSpec> | null = null;
  if (body.templates !== undefined && body.templates !== null) {
    if (!isPlainObject(body.templates)) throw badRequest('"templates" must be a map of target paths to templates');
    templates = {};
    for (const [target, spec] of Object.entries(body.templates)) templates[target] = templateField(target, spec);
  }
  return {
    architecture: stringField(body.architecture, 'architecture'),
    creation_date: dateField(body.creation_date, 'creation_date'),
    expiry_date: dateField(body.expiry_date, 'expiry_date'),
    properties: stringMapField(body.properties, 'properties'),
    templates,
  };
}

/** uid, gid (decimal) and mode (octal) of a template's file; defaults are root and 0644. */
export function ownerOf(spec: TemplateSpec, target: string): { uid: number; gid: number; mode: number } {
  const id = (v: string | undefined, what: string) => {
    if (v === undefined) return 0;
    if (!/^\d{1,10}$/.test(v) || Number(v) > 0xfffffffe) throw badRequest(`Template for "${target}": "${what}" must be a numeric id`);
    return Number(v);
  };
  let mode = 0o644;
  if (spec.mode !== undefined) {
    if (!/^0?[0-7]{3,4}$/.test(spec.mode)) throw badRequest(`Template for "${target}": "mode" must be an octal mode such as 0644`);
    mode = parseInt(spec.mode, 8);
  }
  return { uid: id(spec.uid, 'uid'), gid: id(spec.gid, 'gid'), mode };
}

// ---------------------------------------------------------------------------------------------
// Writing.

/** The YAML document in the field order of the reference's files. */
function toYaml(md: InstanceMetadata): string {
  const templates: Record<string, unknown> = {};
  for (const [target, t] of Object.entries(md.templates ?? {})) {
    templates[target] = {
      when: t.when ?? [], create_only: t.create_only, template: t.template, properties: t.properties ?? {},
      ...(t.uid !== undefined ? { uid: t.uid } : {}), ...(t.gid !== undefined ? { gid: t.gid } : {}), ...(t.mode !== undefined ? { mode: t.mode } : {}),
    };
  }
  return yaml().stringify({
    architecture: md.architecture,
    creation_date: md.creation_date,
    expiry_date: md.expiry_date,
    properties: md.properties ?? {},
    templates,
  });
}

export async function writeMetadata(volumePath: string, md: InstanceMetadata): Promise<void> {
  if (!volumePath) throw internalError('The storage of this instance is not available');
  await replaceFile(volumePath, 'metadata.yaml', toYaml(md));
}
