/**
 * Reading a JSON body by hand, for routes declared with `rawBody` because they also take uploads
 * (POST /1.0/images, POST /1.0/instances): the same answers as the kernel's own JSON parsing.
 */
import { badRequest } from './errors.js';

/** Default cap of a JSON body read this way. */
export const MAX_JSON_BYTES = 16 * 1024 * 1024;

/** The parsed body; undefined when it is empty (as for routes the kernel parses). */
export async function readJson(body: AsyncIterable<Buffer | string>, maxBytes = MAX_JSON_BYTES): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
    size += buf.length;
    if (size > maxBytes) throw badRequest('The JSON body is too large');
    chunks.push(buf);
  }
  return parseJsonText(Buffer.concat(chunks).toString('utf8'));
}

/** A request body's JSON, for the kernel's parsing and the hand-read one alike: blank is no body. */
export function parseJsonText(text: string): unknown {
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch (err) {
    // The parser's own text varies between Node versions and quotes the input: give the position only.
    const at = /position (\d+)/.exec((err as Error).message)?.[1];
    throw badRequest(`The request body is not valid JSON${at === undefined ? '' : ` (at character ${at})`}`);
  }
}
