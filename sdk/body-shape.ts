/**
 * The shapes of JSON bodies, shared by every family. A route declares its body with `objectBody`
 * (VerbSpec.body) and the kernel refuses anything else with a 400 before the handler runs: an
 * empty body, a body that is not a JSON object, a field of the wrong type. Nothing is created or
 * started for a body that does not fit.
 */
import Joi, { type ObjectSchema, type Schema, type SchemaMap } from 'joi';
import { ApiError, badRequest } from './errors.js';
import { cutToBody } from './body-shape-cut.js';

/** A string that may be empty; null reads as absent, as the reference's JSON decoding takes it. */
const text = Joi.string().allow('', null);
/** Config-style maps: string values only (a number is refused, as the reference does). */
const stringMapShape = Joi.object().pattern(/^/, Joi.string().allow('')).allow(null);

/** Building blocks for the fields most bodies share. */
export const bodyShape = {
  text,
  flag: Joi.boolean().allow(null),
  config: stringMapShape,
  /** `devices`: a map of device name to a map of strings. */
  devices: Joi.object().pattern(/^/, Joi.object().pattern(/^/, Joi.string().allow(''))).allow(null),
  /** A list of names (`profiles`, `projects`). */
  names: Joi.array().items(Joi.string()).allow(null),
  /** A nested object whose fields the handler checks. */
  object: Joi.object().unknown(true).allow(null),
  /** A list of objects whose fields the handler checks. */
  objects: Joi.array().items(Joi.object().unknown(true)).allow(null),
};

/**
 * A body that must be a JSON object with these fields' types. Unknown fields pass: clients echo
 * back what they read (DESIGN.md 1).
 */
export function objectBody(keys: SchemaMap = {}): ObjectSchema {
  return Joi.object(keys).unknown(true).required();
}

/** The common writable fields of most objects: description and config. */
export const describedConfigBody = (keys: SchemaMap = {}): ObjectSchema =>
  objectBody({ description: text, config: stringMapShape, ...keys });

/** POST of an object that renames it: `{"name": ...}`. */
export const renameBody = objectBody({ name: text });

// Our wording for the checks whose stock text is vague; the others read well as joi writes them.
const MESSAGES = {
  'object.base': '{{#label}} must be a JSON object',
  'array.base': '{{#label}} must be a list',
  'boolean.base': '{{#label}} must be true or false',
  'string.base': '{{#label}} must be a string',
  'number.base': '{{#label}} must be a number',
};

/**
 * The schema with our messages and settings built in. Joi compiles the templates of messages given to
 * validate() on every call (nine tenths of a body check, 15 µs of 16); given to prefs() once, they are compiled once.
 */
const preferred = [new WeakMap<Schema, Schema>(), new WeakMap<Schema, Schema>()] as const;
function withOurPreferences(schema: Schema, convert: boolean): Schema {
  const cache = preferred[convert ? 1 : 0];
  let ready = cache.get(schema);
  if (!ready) {
    ready = schema.prefs({ abortEarly: true, convert, messages: MESSAGES, errors: { stack: false } });
    cache.set(schema, ready);
  }
  return ready;
}

/**
 * Check `value` against `schema`; the value joi returns (defaults filled in) or a 400 of ours.
 * `what` names the part checked ("request body", "query"); `convert` lets joi cast text (query strings).
 */
export function checkShape(schema: Schema, value: unknown, what: string, convert = false): any {
  const required = schema.$_getFlag('presence') === 'required';
  if (value === undefined && required) throw badRequest(`The ${what} is empty: a JSON object is expected`);
  const body = value === undefined ? {} : value;
  const result = withOurPreferences(cutToBody(schema, body), convert).validate(body);
  if (!result.error) return result.value;
  throw shapeError(result.error, what);
}

const MAX_MESSAGE = 300;

function shapeError(error: Joi.ValidationError, what: string): ApiError {
  const detail = error.details[0];
  if (!detail || detail.path.length === 0) {
    return badRequest(detail?.type === 'object.base' ? `The ${what} must be a JSON object` : `Invalid ${what}`);
  }
  // One short line: a message carries the field and the rule it broke, never a dump of what was sent.
  const message = detail.message.split('\n')[0]!;
  return badRequest(`Invalid ${what}: ${message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE)}…` : message}`);
}
