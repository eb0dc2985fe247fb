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
  /** A whole answer's headers as written (wholeAnswerHead), for one written again and again. */
  head?: Readonly<Record<string, string | number>>;
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
 * The headers of a whole (not streamed) answer as hapi writes them for a GET (compression off, no
 * ranges asked): its own lower-cased, the listener's `extra` (CORS), `cache-control: no-cache`, its
 * length, `accept-ranges` on a 200.
 */
export function wholeAnswerHead(answer: Answer, extra?: Readonly<Record<string, string>>): Record<string, string | number> {
  const headers = headersOf(answer, extra);
  const body = answer.body as string | Buffer;
  headers['content-length'] = typeof body === 'string' ? Buffer.byteLength(body) : body.length;
  if (answer.status === 200) headers['accept-ranges'] = 'bytes';
  return headers;
}

function headersOf(answer: Answer, extra: Readonly<Record<string, string>> | undefined): Record<string, string | number> {
  const headers: Record<string, string | number> = { 'content-type': contentType(answer.type) };
  if (answer.headers) for (const name in answer.headers) headers[name.toLowerCase()] = answer.headers[name]!;
  if (extra) for (const name in extra) headers[name.toLowerCase()] = extra[name]!;
  headers['cache-control'] = 'no-cache';
  return headers;
}

/** Write an answer as hapi writes it (wholeAnswerHead; a stream's length is not known). `extra`: the listener's headers. */
export function writeAnswer(res: ServerResponse, answer: Answer, extra?: Readonly<Record<string, string>>): void {
  const body = answer.body;
  if (!isStream(body)) {
    // One object handed to writeHead: node writes it as it is, without keeping each header apart.
    res.writeHead(answer.status, answer.head !== undefined && extra === undefined ? answer.head : wholeAnswerHead(answer, extra)).end(body);
    return;
  }
  const headers = headersOf(answer, extra);
  if (answer.status === 200 && headers['content-length'] !== undefined) headers['accept-ranges'] = 'bytes';
  res.writeHead(answer.status, headers);
  // A client that goes away, or a source that fails, ends both sides (as hapi destroys its stream).
  pipeline(body, res, () => undefined);
}

/** Whether writing the answer goes on after writeAnswer returns (a streamed body). */
export const streamed = (answer: Answer): boolean => isStream(answer.body);

const isStream = (body: Answer['body']): body is NodeJS.ReadableStream => typeof body !== 'string' && !Buffer.isBuffer(body);
