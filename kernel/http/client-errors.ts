/**
 * Requests node's HTTP parser refuses (unknown methods, bad Content-Length, bad chunked encoding,
 * oversize headers, timeouts) never reach hapi. They are answered here with the error envelope in
 * our words, and the parser's own text only goes to the log.
 */
import type { Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type Logger from 'bunyan';
import { badRequest } from '../../sdk/index.js';
import { endWithError } from './raw-answer.js';
import { failBody } from './request-body.js';

const PARSER_FAILURES: Record<string, string> = {
  HPE_INVALID_METHOD: 'Unsupported HTTP method',
  HPE_INVALID_URL: 'Invalid request target',
  HPE_INVALID_VERSION: 'Unsupported HTTP version',
  HPE_HEADER_OVERFLOW: 'Request line or headers too large',
  HPE_INVALID_HEADER_TOKEN: 'Invalid request header',
  HPE_INVALID_CONSTANT: 'Malformed request line',
  HPE_INVALID_CONTENT_LENGTH: 'Invalid Content-Length header',
  HPE_UNEXPECTED_CONTENT_LENGTH: 'Content-Length and Transfer-Encoding cannot be used together',
  HPE_INVALID_TRANSFER_ENCODING: 'Invalid Transfer-Encoding header',
  HPE_INVALID_CHUNK_SIZE: 'Invalid chunked encoding in the request body',
  HPE_CHUNK_EXTENSIONS_OVERFLOW: 'Invalid chunked encoding in the request body',
  ERR_HTTP_REQUEST_TIMEOUT: 'The request did not arrive in time',
  ERR_HTTP_HEADERS_TIMEOUT: 'The request headers did not arrive in time',
};

/** How long a refused connection may keep sending before it is cut. */
const LINGER_MS = 5000;

const answered = new WeakSet<Duplex>();

export function answerClientErrors(listener: Server, log: Logger): void {
  // hapi's handler writes a bare 400 without a body: ours replaces it.
  for (const other of listener.listeners('clientError')) listener.off('clientError', other as (...args: unknown[]) => void);
  listener.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    if (answered.has(socket)) return;
    answered.add(socket);
    log.debug({ err: err.message, code: err.code }, 'malformed HTTP request');
    if (err.code === 'ECONNRESET' || !socket.writable) return void socket.destroy();
    const inFlight = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage ?? undefined;
    const message = (err.code && PARSER_FAILURES[err.code]) ?? (inFlight && !inFlight.req.complete ? 'Malformed request body' : 'Malformed HTTP request');
    if (inFlight && !inFlight.headersSent) {
      // The parser is done with this connection: the answer in progress is its last, and says so (a
      // client must not send another request on it, nor read a second answer after one that closes).
      inFlight.setHeader('Connection', 'close');
      // A broken body of the request being served: whoever reads it fails with our message.
      if (!inFlight.req.complete) failBody(inFlight.req, badRequest(message));
      return;
    }
    if (inFlight && !inFlight.writableFinished) {
      // The answer in progress promised keep-alive already: ours for the broken request follows it.
      let done = false;
      const after = () => {
        if (!done) refuse(socket, message);
        done = true;
      };
      inFlight.once('finish', after);
      inFlight.once('close', after);
      return;
    }
    refuse(socket, message);
  });
}

function refuse(socket: Duplex, message: string): void {
  endWithError(socket, 400, message);
  setTimeout(() => socket.destroy(), LINGER_MS).unref();
}
