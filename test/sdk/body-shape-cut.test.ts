/**
 * A body is checked against its schema cut to the keys it has (sdk/body-shape-cut.ts): the answer must be
 * joi's answer with the whole schema, for good and bad bodies alike, and a schema whose left-out keys could
 * matter is never cut.
 */
import test from 'ava';
import Joi, { type Schema } from 'joi';
import { bodyShape, objectBody } from '../../sdk/index.js';
import { cutToBody } from '../../sdk/body-shape-cut.js';

const nested = Joi.object({
  type: bodyShape.text, mode: bodyShape.text, live: bodyShape.flag, properties: bodyShape.config,
  deeper: Joi.object({ a: bodyShape.text, b: Joi.number().integer().allow(null) }).unknown(true).allow(null),
}).unknown(true).allow(null);
const body = objectBody({
  name: bodyShape.text, config: bodyShape.config, devices: bodyShape.devices, profiles: bodyShape.names,
  ephemeral: bodyShape.flag, source: nested, target: Joi.alternatives(bodyShape.text, bodyShape.object),
  count: Joi.number().integer().allow(null),
});

const BODIES: unknown[] = [
  {}, { name: 'c1' }, { name: 'c1', source: { type: 'none' } }, { source: { type: 'image', mode: 'pull', deeper: { a: 'x', b: 2 } } },
  { name: 5 }, { name: 'c1', source: { type: 5 } }, { source: { deeper: { b: 'two' } } }, { source: null }, { source: [] },
  { config: { 'limits.cpu': '2' }, devices: { root: { path: '/', pool: 'default' } } }, { config: { a: 1 } },
  { devices: { eth0: { mtu: 1500 } } }, { profiles: ['default', 7] }, { ephemeral: 'yes' }, { target: 'm1' }, { target: 3 },
  { count: 1.5 }, { count: '2' }, { unknown: { anything: [1, 2] }, name: 'c2' }, { name: 'c1', extra: true, source: { type: 'copy', other: 1 } },
  [], 'text', 7, null,
];

const outcome = (schema: Schema, value: unknown, prefs: Joi.ValidationOptions) => {
  const result = schema.validate(value, prefs);
  return { value: result.value, error: result.error?.message, details: result.error?.details.map((d) => [d.type, d.path]) };
};

test('every body gets the answer the whole schema gives, with and without conversion or early abort', (t) => {
  for (const prefs of [{ abortEarly: true, convert: false }, { abortEarly: false, convert: true }]) {
    for (const value of BODIES) {
      t.deepEqual(outcome(cutToBody(body, value), value, prefs), outcome(body, value, prefs), JSON.stringify(value));
    }
  }
});

test('the cut names only the keys the body has, nested objects too', (t) => {
  const described = cutToBody(body, { name: 'c1', source: { type: 'none' }, other: 1 }).describe();
  t.deepEqual(Object.keys(described.keys ?? {}), ['name', 'source']);
  t.deepEqual(Object.keys(described.keys?.source?.keys ?? {}), ['type']);
  t.is((described.flags as { presence?: string } | undefined)?.presence, 'required', 'the object keeps its own flags');
  t.is(cutToBody(body, { name: 'c1', source: { type: 'none' } }), cutToBody(body, { source: { type: 'image' }, name: 'c2' }), 'kept per set of keys');
});

test('a schema is used whole where a key left out could matter, and past the bound of kept cuts', (t) => {
  const required = objectBody({ name: Joi.string().required(), other: bodyShape.text });
  t.is(cutToBody(required, { other: 'x' }), required);
  const defaulted = objectBody({ name: bodyShape.text, mode: Joi.string().default('pull') });
  t.is(cutToBody(defaulted, { name: 'x' }), defaulted);
  const tied = objectBody({ a: bodyShape.text, b: bodyShape.text }).and('a', 'b');
  t.is(cutToBody(tied, { a: 'x' }), tied);
  t.is(cutToBody(body, []), body);

  const wide = objectBody(Object.fromEntries(Array.from({ length: 80 }, (_, i) => [`k${i}`, bodyShape.text])));
  const cutsMade = Array.from({ length: 80 }, (_, i) => cutToBody(wide, { [`k${i}`]: 'x' }));
  t.true(cutsMade.slice(0, 64).every((cut) => cut !== wide));
  t.true(cutsMade.slice(64).every((cut) => cut === wide));
  t.is(wide.validate({ k70: 5 }).error?.message, cutsMade[70]!.validate({ k70: 5 }).error?.message);
});
