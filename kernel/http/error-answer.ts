/**
 * The error envelope for whatever failed, whichever lane served the request: an ApiError says its own
 * status and message; what hapi or a library refused is told in our words (their text stays in the
 * log); anything else is a 500.
 */
import type Logger from 'bunyan';
import { ApiError } from '../../sdk/index.js';
import { allowedStatus, errorBody } from './envelope.js';
import { jsonAnswer, type Answer } from './answer.js';

export function errorAnswer(err: unknown, log: Logger, path: string): Answer {
  const { status, message, metadata } = describeError(err);
  if (status === 500) log.error({ err, path }, 'request failed');
  else if (err instanceof ApiError && err.cause) log.warn({ err: rootCause(err), path }, `request refused: ${message}`);
  else if (!(err instanceof ApiError)) log.debug({ err, path }, 'request refused by the HTTP layer');
  return jsonAnswer(errorBody(status, message, metadata), status);
}

/** The original failure under the refusals that wrapped it (the client read only the outermost, in our words). */
function rootCause(err: Error): unknown {
  let cause: unknown = err;
  while (cause instanceof Error && cause.cause !== undefined) cause = cause.cause;
  return cause;
}

/** What hapi itself refuses, in our words (its own text, and that of the libraries under it, stays in the log). */
const HAPI_REFUSALS: Partial<Record<number, string>> = {
  400: 'Bad request',
  401: 'Not authorized',
  403: 'Not authorized',
  404: 'Not found',
  405: 'Method not allowed',
  408: 'The request did not arrive in time',
  413: 'Request body too large',
  415: 'Unsupported content type',
};

function describeError(err: unknown): { status: ReturnType<typeof allowedStatus>; message: string; metadata: unknown } {
  if (err instanceof ApiError) return { status: err.status, message: err.message, metadata: err.metadata };
  const code = (err as { isBoom?: boolean; output?: { statusCode?: number } } | undefined)?.isBoom ? (err as { output: { statusCode: number } }).output.statusCode : 500;
  if (code >= 500) return { status: 500, message: 'Internal server error', metadata: null };
  return { status: allowedStatus(code), message: HAPI_REFUSALS[code] ?? 'Bad request', metadata: null };
}
