/**
 * A joi shape as an OpenAPI 3.1 schema (JSON Schema 2020-12), read from joi's own `describe()`.
 * Written here rather than taken from a converter library: the one tried (joi-to-json 5.0.5) turns
 * `pattern(Joi.string(), …)` maps, the daemon's config maps, into objects that forbid every key.
 * What JSON Schema cannot say (custom rules, references between fields) is left out: the schema then
 * admits more than the route does, never less.
 */
import type { Description } from 'joi';

export type JsonSchema = Record<string, unknown>;

interface Flags {
  presence?: 'required' | 'optional' | 'forbidden';
  only?: boolean;
  default?: unknown;
  description?: string;
}

interface Rule {
  name: string;
  args?: Record<string, unknown>;
}

const flagsOf = (d: Description): Flags => (d.flags ?? {}) as Flags;
const rulesOf = (d: Description): Rule[] => ((d as { rules?: Rule[] }).rules ?? []);

export const isRequired = (d: Description): boolean => flagsOf(d).presence === 'required';
export const isForbidden = (d: Description): boolean => flagsOf(d).presence === 'forbidden';

export function toJsonSchema(d: Description): JsonSchema {
  const flags = flagsOf(d);
  const allowed = ((d.allow ?? []) as unknown[]).filter(isPlainValue);
  let schema: JsonSchema;
  if (flags.only) {
    schema = { enum: allowed };
  } else {
    schema = byType(d);
    if (allowed.includes(null)) schema = withNull(schema);
    const extra = allowed.filter((v) => v !== null && !fitsType(schema, v));
    if (extra.length) schema = { anyOf: [schema, { enum: extra }] };
  }
  if (typeof flags.description === 'string') schema.description = flags.description;
  if (flags.default !== undefined && isPlainValue(flags.default) && typeof flags.default !== 'object') schema.default = flags.default;
  return schema;
}

function byType(d: Description): JsonSchema {
  const rules = rulesOf(d);
  switch (d.type) {
    case 'string': {
      const s: JsonSchema = { type: 'string' };
      for (const rule of rules) {
        if (rule.name === 'min') s.minLength = rule.args?.limit;
        else if (rule.name === 'max') s.maxLength = rule.args?.limit;
        else if (rule.name === 'length') s.minLength = s.maxLength = rule.args?.limit;
        else if (rule.name === 'pattern' && !(rule.args?.options as { invert?: boolean } | undefined)?.invert) {
          const source = regexSource(rule.args?.regex);
          if (source !== undefined) s.pattern = source;
        }
      }
      return dropNonNumbers(s, ['minLength', 'maxLength']);
    }
    case 'number': {
      const s: JsonSchema = { type: rules.some((r) => r.name === 'integer') ? 'integer' : 'number' };
      for (const rule of rules) {
        if (rule.name === 'min') s.minimum = rule.args?.limit;
        else if (rule.name === 'max') s.maximum = rule.args?.limit;
        else if (rule.name === 'greater') s.exclusiveMinimum = rule.args?.limit;
        else if (rule.name === 'less') s.exclusiveMaximum = rule.args?.limit;
      }
      return dropNonNumbers(s, ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum']);
    }
    case 'boolean':
      return { type: 'boolean' };
    case 'object':
      return objectSchema(d);
    case 'array': {
      const items = ((d.items ?? []) as Description[]).map(toJsonSchema);
      const s: JsonSchema = { type: 'array' };
      if (items.length === 1) s.items = items[0];
      else if (items.length > 1) s.items = { anyOf: items };
      for (const rule of rules) {
        if (rule.name === 'min') s.minItems = rule.args?.limit;
        else if (rule.name === 'max') s.maxItems = rule.args?.limit;
      }
      return dropNonNumbers(s, ['minItems', 'maxItems']);
    }
    case 'alternatives': {
      const options: JsonSchema[] = [];
      for (const match of (d.matches ?? []) as { schema?: Description; then?: Description; otherwise?: Description }[]) {
        for (const branch of [match.schema, match.then, match.otherwise]) if (branch) options.push(toJsonSchema(branch));
      }
      return options.length ? { anyOf: options } : {};
    }
    default:
      // any, custom, link, date, binary…: whatever joi accepts there, JSON Schema does not restrict.
      return {};
  }
}

function objectSchema(d: Description): JsonSchema {
  const s: JsonSchema = { type: 'object' };
  const keys = d.keys as Record<string, Description> | undefined;
  const properties: Record<string, JsonSchema> = {};
  const required: string[] = [];
  for (const [name, field] of Object.entries(keys ?? {})) {
    if (isForbidden(field)) continue;
    properties[name] = toJsonSchema(field);
    if (isRequired(field)) required.push(name);
  }
  if (Object.keys(properties).length) s.properties = properties;
  if (required.length) s.required = required;

  const patterns = (d.patterns ?? []) as { regex?: string; schema?: Description; rule?: Description }[];
  const patternProperties: Record<string, JsonSchema> = {};
  let otherKeys: JsonSchema | boolean | undefined;
  for (const p of patterns) {
    const value = p.rule ? toJsonSchema(p.rule) : {};
    const source = p.regex === undefined ? undefined : regexSource(p.regex);
    // A key shape rather than a key regex (`pattern(Joi.string(), …)`): every further key has this value.
    if (source === undefined) otherKeys = value;
    else patternProperties[source] = value;
  }
  if (Object.keys(patternProperties).length) s.patternProperties = patternProperties;

  const unknown = (flagsOf(d) as { unknown?: boolean }).unknown;
  if (otherKeys !== undefined) s.additionalProperties = otherKeys;
  // Joi.object() with no keys admits any; with keys or patterns, only those unless `.unknown()`.
  else if (unknown !== true && (keys !== undefined || patterns.length)) s.additionalProperties = false;
  return s;
}

/** `/^a.*$/` (joi's regex text) as a JSON Schema pattern; none when it carries flags JSON Schema has no room for. */
function regexSource(regex: unknown): string | undefined {
  if (typeof regex !== 'string') return undefined;
  const m = /^\/(.*)\/([a-z]*)$/s.exec(regex);
  if (!m || m[2]!.replace(/[gy]/g, '') !== '') return undefined;
  return m[1];
}

function withNull(schema: JsonSchema): JsonSchema {
  if (typeof schema.type === 'string') return { ...schema, type: [schema.type, 'null'] };
  if (schema.type === undefined && Object.keys(schema).length === 0) return schema;
  if (Array.isArray(schema.anyOf) && Object.keys(schema).length === 1) return { anyOf: [...schema.anyOf, { type: 'null' }] };
  return { anyOf: [schema, { type: 'null' }] };
}

function fitsType(schema: JsonSchema, value: unknown): boolean {
  const types = ([] as unknown[]).concat(schema.type ?? []);
  if (types.length === 0) return true;
  const t = typeof value;
  if (t === 'number') return types.includes('number') || (types.includes('integer') && Number.isInteger(value));
  return types.includes(t);
}

function isPlainValue(v: unknown): boolean {
  if (v === null) return true;
  const t = typeof v;
  if (t === 'string' || t === 'number' || t === 'boolean') return true;
  if (t !== 'object') return false;
  // joi writes references and specials as objects with these markers.
  return !('ref' in (v as object)) && !('special' in (v as object)) && !('override' in (v as object));
}

/** Rule limits given as references (`Joi.ref`) are not numbers: left out. */
function dropNonNumbers(s: JsonSchema, names: string[]): JsonSchema {
  for (const name of names) if (name in s && typeof s[name] !== 'number') delete s[name];
  return s;
}
