/** metadata.yaml: the part of an image that says what it is. */
import { parse } from 'yaml';
import { badRequest, isPlainObject, type ImageMetadata, type ImageTemplate } from '../../sdk/index.js';
import { canonicalArchitecture } from './architectures.js';

/** Scalars of a YAML map as strings (properties such as `release: 22.04` are numbers to YAML). */
function stringMap(value: unknown, what: string): Record<string, string> {
  if (value === undefined || value === null) return {};
  if (!isPlainObject(value)) throw badRequest(`Invalid image metadata: "${what}" must be a map`);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value)) {
    if (v === null || v === undefined) continue;
    if (typeof v === 'object') throw badRequest(`Invalid image metadata: "${what}.${k}" must be a plain value`);
    out[k] = String(v);
  }
  return out;
}

function templates(value: unknown): Record<string, ImageTemplate> {
  if (value === undefined || value === null) return {};
  if (!isPlainObject(value)) throw badRequest('Invalid image metadata: "templates" must be a map');
  const out: Record<string, ImageTemplate> = {};
  for (const [target, spec] of Object.entries(value)) {
    if (!isPlainObject(spec) || typeof spec.template !== 'string') throw badRequest(`Invalid image metadata: template for "${target}" needs a "template" file name`);
    const when = Array.isArray(spec.when) ? spec.when.map(String) : [];
    out[target] = {
      when,
      template: spec.template,
      ...(spec.create_only !== undefined ? { create_only: Boolean(spec.create_only) } : {}),
      ...(spec.properties !== undefined ? { properties: stringMap(spec.properties, `templates.${target}.properties`) } : {}),
      ...(spec.uid !== undefined ? { uid: String(spec.uid) } : {}),
      ...(spec.gid !== undefined ? { gid: String(spec.gid) } : {}),
      ...(spec.mode !== undefined ? { mode: String(spec.mode) } : {}),
    };
  }
  return out;
}

/** Parse and check metadata.yaml; every problem is the client's (400). */
export function parseMetadata(text: string): ImageMetadata {
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (err) {
    throw badRequest(`Invalid image metadata: metadata.yaml is not valid YAML (${(err as Error).message.split('\n')[0]})`);
  }
  if (!isPlainObject(doc)) throw badRequest('Invalid image metadata: metadata.yaml must be a map');
  const declared = doc.architecture;
  if (typeof declared !== 'string' || declared === '') throw badRequest('Invalid image metadata: "architecture" is missing');
  const architecture = canonicalArchitecture(declared);
  if (!architecture) throw badRequest(`Invalid image metadata: architecture isn't supported: ${declared}`);
  const creation = Number(doc.creation_date);
  if (!Number.isInteger(creation) || creation <= 0) throw badRequest('Invalid image metadata: missing creation date');
  const expiry = doc.expiry_date === undefined || doc.expiry_date === null ? undefined : Number(doc.expiry_date);
  if (expiry !== undefined && (!Number.isInteger(expiry) || expiry < 0)) throw badRequest('Invalid image metadata: "expiry_date" must be a Unix time');
  return {
    architecture,
    creation_date: creation,
    ...(expiry ? { expiry_date: expiry } : {}),
    properties: stringMap(doc.properties, 'properties'),
    templates: templates(doc.templates),
  };
}
