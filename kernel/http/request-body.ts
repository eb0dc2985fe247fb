/**
 * Request bodies, read and left over, with bounds. A body over its limit is refused without being
 * kept; what a client still sends is read and thrown away (bounded) before the answer, so a client
 * that writes its whole body before reading (Python's http.client, Go) gets the error envelope
 * rather than a broken pipe, and its keep-alive connection stays usable.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { badRequest, isApiError, type ApiError } from '../../sdk/index.js';

/** A body that stops arriving for this long is refused. */
export const BODY_IDLE_MS = 30_000;
/** At most this much of an unwanted body is read and discarded before answering; beyond, the connection closes. */
export const DRAIN_MAX_BYTES = 256 * 1024 * 1024;
/** And for at most this long. */
export const DRAIN_MAX_MS = 30_000;

const MIB = 1024 * 1024;

function tooLarge(limit: number): ApiError {
  const size = limit % MIB === 0 ? `${limit / MIB} MiB` : `${limit} bytes`;
  return badRequest(`Request body too large (the limit is ${size})`);
}

function declaredLength(headers: IncomingMessage['headers']): number | undefined {
  const value = headers['content-length'];
  return value === undefined ? undefined : Number(value);
}

/** Refuse a body whose declared length is over the limit before reading any of it. */
export function checkDeclaredLength(headers: IncomingMessage['headers'], limit: number): void {
  const length = declaredLength(headers);
  if (length !== undefined && length > limit) throw tooLarge(limit);
}

/** Bodies the HTTP parser gave up on (bad chunked encoding): whoever reads them, now or later, fails with this. */
const broken = new WeakMap<object, ApiError>();

export function failBody(req: IncomingMessage, err: ApiError): void {
  broken.set(req, err);
  if (req.listenerCount('error') > 0) req.emit('error', err);
}

/** The whole body as bytes, at most `limit` of them. */
export function readBody(stream: Readable, headers: IncomingMessage['headers'], limit: number): Promise<Buffer> {
  checkDeclaredLength(headers, limit);
  const failure = broken.get(stream);
  if (failure) return Promise.reject(failure);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let timer: NodeJS.Timeout | undefined;
    let settled = false;
    const finish = (err: ApiError | undefined) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      stream.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
      if (err) {
        // Stop taking bytes in: what is left is the drainer's (bounded) business.
        stream.pause();
        reject(err);
      } else resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => finish(badRequest('The request body did not arrive in time')), BODY_IDLE_MS);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) return finish(tooLarge(limit));
      chunks.push(chunk);
      arm();
    };
    const onEnd = () => finish(undefined);
    const onError = (err: unknown) => finish(isApiError(err) ? err : badRequest('The request body could not be read'));
    const onClose = () => finish(badRequest('The request body was cut short'));
    if (stream.readableEnded) return resolve(Buffer.alloc(0));
    stream.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
    arm();
  });
}

/** Whether part of this request's body is still unread. */
export function bodyLeft(req: IncomingMessage): boolean {
  if (req.readableEnded || req.destroyed || broken.has(req)) return false;
  const length = declaredLength(req.headers);
  return (length !== undefined && length > 0) || req.headers['transfer-encoding'] !== undefined;
}

/**
 * Read and discard the rest of a body before answering, within DRAIN_MAX_BYTES and DRAIN_MAX_MS.
 * Not for a client still waiting for `100 Continue`: it sends nothing more, and the connection closes.
 */
export function drainBody(req: IncomingMessage, res: ServerResponse): Promise<void> {
  // `_sent100`: node's own record of writeContinue() (hapi sends it when it reaches a route's payload).
  const waitingForContinue = req.headers.expect !== undefined && !(res as ServerResponse & { _sent100?: boolean })._sent100;
  if (!bodyLeft(req) || waitingForContinue) return Promise.resolve();
  const length = declaredLength(req.headers);
  if (length !== undefined && length > DRAIN_MAX_BYTES) return Promise.resolve();
  return new Promise((resolve) => {
    let drained = 0;
    const done = () => {
      clearTimeout(timer);
      req.off('data', onData).off('end', done).off('error', done).off('close', done);
      req.pause();
      resolve();
    };
    const onData = (chunk: Buffer) => {
      drained += chunk.length;
      if (drained > DRAIN_MAX_BYTES) done();
    };
    const timer = setTimeout(done, DRAIN_MAX_MS);
    req.on('data', onData).on('end', done).on('error', done).on('close', done);
    req.resume();
  });
}
