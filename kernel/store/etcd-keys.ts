/**
 * Where documents live in etcd: one key per document, `/corral/doc/<ns>␀<collection>␀<project>␀<name>`,
 * value `<rev>\n<body>`. NUL separators keep etcd's byte order equal to (project, name) order, as
 * sqlite sorts them, and let a name hold any other character ('/' included).
 */
import type { DocAddress, Row } from './backend.js';

export const DOC_PREFIX = '/corral/doc/';
export const SCHEMA_PREFIX = '/corral/schema/';
const SEP = '\0';

/** A NUL inside a component (never seen in practice) is escaped so it cannot split a key. */
const part = (s: string) => s.replace(/\x01/g, '\x01\x02').replace(/\0/g, '\x01\x01');
const unpart = (s: string) => s.replace(/\x01\x01/g, '\0').replace(/\x01\x02/g, '\x01');

export const docKey = (at: DocAddress) => DOC_PREFIX + [at.namespace, at.collection, at.project, at.name].map(part).join(SEP);

/** Prefix of a collection's keys, of one project's, or of one project's names starting with `namePrefix`. */
export function docPrefix(namespace: string, collection: string, project?: string, namePrefix = ''): string {
  const base = DOC_PREFIX + part(namespace) + SEP + part(collection) + SEP;
  return project === undefined ? base : base + part(project) + SEP + part(namePrefix);
}

export function parseDocKey(key: string): DocAddress | undefined {
  if (!key.startsWith(DOC_PREFIX)) return undefined;
  const parts = key.slice(DOC_PREFIX.length).split(SEP);
  if (parts.length !== 4) return undefined;
  const [namespace, collection, project, name] = parts.map(unpart) as [string, string, string, string];
  return { namespace, collection, project, name };
}

export const schemaKey = (namespace: string) => SCHEMA_PREFIX + part(namespace);
export const parseSchemaKey = (key: string) => unpart(key.slice(SCHEMA_PREFIX.length));

export const encodeValue = (rev: number, body: string) => `${rev}\n${body}`;

export function decodeValue(at: DocAddress, value: string, version: number): Row {
  const nl = value.indexOf('\n');
  return { project: at.project, name: at.name, rev: Number(value.slice(0, nl)), body: value.slice(nl + 1), version };
}

/** The first key after every key starting with `prefix` (etcd's range_end for a prefix). */
export function prefixEnd(prefix: string): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i]!++;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]);
}
