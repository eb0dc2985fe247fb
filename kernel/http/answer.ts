/**
 * What the pipeline answers, before any transport writes it: a status, a content type, headers and a
 * body. hapi writes it for most requests (`toHapi`); the fast lane for plain reads writes it on Node's
 * own response (`writeAnswer`) with the very headers hapi would have sent.
 */
import type { ResponseToolkit, ResponseObject } from '@hapi/hapi';
import type { ServerResponse } from 'node:http';
import { pipeline } from 'node:stream';

export interface Answer {
  status: number;
  /** Content-Type as the pipeline names it (the charset is added as hapi adds it). */
  type: string;
  /** Further headers, in the order they are set. */
  headers?: Readonly<Record<string, string>>;
  body: string | Buffer | NodeJS.ReadableStream;
}

/** The request went elsewhere (proxied to another member): its answer is written already. */
export const ABANDONED = Symbol('abandoned');

export const JSON_TYPE = 'application/json';

export function jsonAnswer(body: string | Buffer, status = 200, headers?: Readonly<Record<string, string>>): Answer {
  return { status, type: JSON_TYPE, headers, body };
}

export function toHapi(h: ResponseToolkit, answer: Answer): ResponseObject {
  const r = h.response(answer.body as string).type(answer.type).code(answer.status);
  for (const [name, value] of Object.entries(answer.headers ?? {})) r.header(name, value);
  return r;
}

/** hapi's rule: text, JSON and JavaScript without a charset are UTF-8. */
const CHARSET_TYPES = /^(?:text\/)|(?:application\/(?:json)|(?:javascript))/;

function contentType(type: string): string {
  const trimmed = type.trim();
  return CHARSET_TYPES.test(trimmed) && !/; *charset=/.test(trimmed) ? `${trimmed}; charset=utf-8` : trimmed;
}

/**
 * Write an answer as hapi writes it for a GET (compression off, no ranges asked): its headers
 * lower-cased, `cache-control: no-cache`, the length of a whole body, `accept-ranges` on a 200 of known
 * length. `extra`: the listener's headers on every answer (CORS).
 */
export function writeAnswer(res: ServerResponse, answer: Answer, extra?: Readonly<Record<string, string>>): void {
  res.statusCode = answer.status;
  res.setHeader('content-type', contentType(answer.type));
  for (const [name, value] of Object.entries(answer.headers ?? {})) res.setHeader(name.toLowerCase(), value);
  for (const [name, value] of Object.entries(extra ?? {})) res.setHeader(name.toLowerCase(), value);
  res.setHeader('cache-control', 'no-cache');
  const body = answer.body;
  if (typeof body === 'string' || Buffer.isBuffer(body)) {
    res.setHeader('content-length', typeof body === 'string' ? Buffer.byteLength(body) : body.length);
    if (answer.status === 200) res.setHeader('accept-ranges', 'bytes');
    res.end(body);
    return;
  }
  if (answer.status === 200 && res.hasHeader('content-length')) res.setHeader('accept-ranges', 'bytes');
  // A client that goes away, or a source that fails, ends both sides (as hapi destroys its stream).
  pipeline(body, res, () => undefined);
}
