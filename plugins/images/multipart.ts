/**
 * A streaming reader of multipart/form-data bodies (the split image upload): parts are handed
 * over chunk by chunk, so a multi-GB rootfs never sits in memory.
 */
import { badRequest } from '../../sdk/index.js';

export interface PartInfo {
  name: string;
  filename: string;
}

export interface PartHandler {
  start(part: PartInfo): Promise<void>;
  /** A promise only when the handler wants the reading to wait (back-pressure). */
  data(chunk: Buffer): Promise<void> | undefined;
  end(): Promise<void>;
}

const CRLF = Buffer.from('\r\n');
const HEADER_END = Buffer.from('\r\n\r\n');
const MAX_HEADER_BYTES = 16 * 1024;

/** The boundary parameter of a multipart Content-Type, or undefined. */
export function multipartBoundary(contentType: string): string | undefined {
  const m = /boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType);
  return m ? (m[1] ?? m[2]) : undefined;
}

function dispositionParam(value: string, param: string): string | undefined {
  const m = new RegExp(`(?:^|;)\\s*${param}=(?:"((?:[^"\\\\]|\\\\.)*)"|([^;\\s]*))`, 'i').exec(value);
  if (!m) return undefined;
  return m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : m[2];
}

function parsePartHeaders(block: string): PartInfo {
  let disposition = '';
  for (const line of block.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === 'content-disposition') disposition = line.slice(colon + 1).trim();
  }
  const name = dispositionParam(disposition, 'name');
  if (!name) throw badRequest('Invalid multipart image: a part has no name');
  return { name, filename: dispositionParam(disposition, 'filename') ?? '' };
}

/**
 * Where a delimiter cut off by the end of `buf` could begin (buf.length when none can): only that
 * tail is kept back, so most chunks are handed over whole instead of being copied into the next.
 */
function partialDelimiterAt(buf: Buffer, delimiter: Buffer): number {
  for (let at = buf.indexOf(delimiter[0]!, Math.max(0, buf.length - delimiter.length + 1)); at >= 0; at = buf.indexOf(delimiter[0]!, at + 1)) {
    if (buf.subarray(at).equals(delimiter.subarray(0, buf.length - at))) return at;
  }
  return buf.length;
}

type State = 'delimiter' | 'headers' | 'body' | 'done';

export async function readMultipart(body: AsyncIterable<Buffer | string>, boundary: string, handler: PartHandler): Promise<void> {
  // Every delimiter is CRLF + "--" + boundary; the body's first one has no CRLF before it, so add one.
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  let buf: Buffer = Buffer.from(CRLF);
  let state: State = 'delimiter';
  let seenFirst = false;

  const step = async (): Promise<boolean> => {
    switch (state) {
      case 'delimiter': {
        const at = buf.indexOf(delimiter);
        if (at < 0) {
          // Preamble before the first delimiter is ignored; keep a possible partial delimiter.
          if (!seenFirst) buf = buf.subarray(Math.max(0, buf.length - delimiter.length));
          return false;
        }
        if (seenFirst && at !== 0) throw badRequest('Invalid multipart image: data after a part boundary');
        const rest = buf.subarray(at + delimiter.length);
        if (rest.length < 2) return false;
        seenFirst = true;
        if (rest[0] === 0x2d && rest[1] === 0x2d) {
          state = 'done';
          return false;
        }
        const eol = rest.indexOf(CRLF);
        if (eol < 0) return false;
        buf = rest.subarray(eol + 2);
        state = 'headers';
        return true;
      }
      case 'headers': {
        const end = buf.indexOf(HEADER_END);
        if (end < 0) {
          // A part with no headers at all starts with the blank line.
          if (buf.length >= 2 && buf[0] === 0x0d && buf[1] === 0x0a) throw badRequest('Invalid multipart image: a part has no headers');
          if (buf.length > MAX_HEADER_BYTES) throw badRequest('Invalid multipart image: part headers are too long');
          return false;
        }
        await handler.start(parsePartHeaders(buf.subarray(0, end).toString('utf8')));
        buf = buf.subarray(end + HEADER_END.length);
        state = 'body';
        return true;
      }
      case 'body': {
        const at = buf.indexOf(delimiter);
        if (at >= 0) {
          if (at > 0) await handler.data(buf.subarray(0, at));
          await handler.end();
          buf = buf.subarray(at);
          state = 'delimiter';
          return true;
        }
        // Hand over all but what could be the start of a delimiter split across chunks.
        const keep = partialDelimiterAt(buf, delimiter);
        if (keep > 0) {
          const wait = handler.data(buf.subarray(0, keep));
          buf = buf.subarray(keep);
          if (wait) await wait;
        }
        return false;
      }
      case 'done':
        return false;
    }
  };

  // `step` moves the state; read it through a function so the compiler does not narrow it here.
  const finished = () => state === 'done';
  for await (const chunk of body) {
    if (finished()) continue;
    const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
    buf = buf.length === 0 ? bytes : Buffer.concat([buf, bytes]);
    while (await step()) { /* consume what the buffer holds */ }
  }
  if (!finished()) throw badRequest('Invalid multipart image: the body ended before its closing boundary');
}
