/** metadata.yaml: the part of an image that says what it is. */
import { yaml } from '../../sdk/lib/yaml/index.js';
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

/** YAML 1.1 booleans, as the reference's YAML reader takes them (`create_only: yes`). */
const YAML11_TRUE = /^(y|yes|true|on)$/i;
const YAML11_FALSE = /^(n|no|false|off)$/i;

function flag(value: unknown, what: string): boolean {
  if (typeof value === 'boolean') return value;
  if (typeof value === 'string' && YAML11_TRUE.test(value)) return true;
  if (typeof value === 'string' && YAML11_FALSE.test(value)) return false;
  throw badRequest(`Invalid image metadata: "${what}" must be true or false`);
}

/** `when` is a list of triggers; a single word or a map is refused, as the reference refuses it. */
function triggers(value: unknown, what: string): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || value.some((w) => w === null || typeof w === 'object')) {
    throw badRequest(`Invalid image metadata: "${what}" must be a list of triggers (create, copy, start, rename)`);
  }
  return value.map(String);
}

/** A template is a file directly in templates/: a plain name, never a path out of it. */
function templateName(value: unknown, target: string): string {
  if (typeof value !== 'string' || value === '') throw badRequest(`Invalid image metadata: template for "${target}" needs a "template" file name`);
  if (value.includes('/') || value.includes('\0') || value === '.' || value === '..' || value.length > 255) {
    throw badRequest(`Invalid image metadata: template for "${target}" must name a file in templates/, not "${value}"`);
  }
  return value;
}

function templates(value: unknown): Record<string, ImageTemplate> {
  if (value === undefined || value === null) return {};
  if (!isPlainObject(value)) throw badRequest('Invalid image metadata: "templates" must be a map');
  const out: Record<string, ImageTemplate> = {};
  for (const [target, spec] of Object.entries(value)) {
    if (!isPlainObject(spec)) throw badRequest(`Invalid image metadata: template for "${target}" must be a map`);
    out[target] = {
      when: triggers(spec.when, `templates.${target}.when`),
      template: templateName(spec.template, target),
      ...(spec.create_only !== undefined && spec.create_only !== null ? { create_only: flag(spec.create_only, `templates.${target}.create_only`) } : {}),
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
    doc = yaml().parse(text);
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
