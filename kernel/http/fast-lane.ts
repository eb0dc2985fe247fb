/**
 * Plain reads beside hapi (decision 0079). hapi's request lifecycle (its request object, extension
 * points, response marshalling) was more than half of what a GET cost the daemon. A GET that asks for
 * nothing hapi adds (no body, no conditional or range headers, no browser origin, a path as sent with no
 * escapes or dot segments) and whose path hapi's own router matches to a pipeline route is answered by
 * the pipeline here, on Node's response, with the headers hapi would send. Everything else, and every
 * request while the listener stops, goes to hapi as before.
 */
import type Hapi from '@hapi/hapi';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parse as parseQueryString } from 'node:querystring';
import type { Readable } from 'node:stream';
import type Logger from 'bunyan';
import { ABANDONED, streamed, writeAnswer, type Answer } from './answer.js';
import { errorAnswer } from './error-answer.js';

/** What the pipeline needs of a request, whichever lane received it. */
export interface Incoming {
  /** Lower case, as hapi names it. */
  method: string;
  path: string;
  params: Record<string, string>;
  query: Record<string, unknown>;
  raw: IncomingMessage;
  res: ServerResponse;
  /** The body as hapi hands it over (unread); none in the fast lane, which takes no bodies. */
  payload: Readable | undefined;
}

/** The route of a plain read's path, if the fast lane may answer it: how, and the path's parameters. */
export interface FastRoute {
  params: Record<string, string>;
  serve(incoming: Incoming): Promise<Answer | typeof ABANDONED>;
}

/** How long a stopping listener waits for the reads it is answering before hapi closes the connections. */
const DRAIN_BOUND_MS = 2_000;

/** Headers that ask for what hapi does (conditional answers, ranges) or checks (a browser's origin). */
const HAPI_HEADERS = ['origin', 'range', 'if-range', 'if-none-match', 'if-modified-since', 'upgrade', 'transfer-encoding'];

function plainRead(req: IncomingMessage): boolean {
  if (req.method !== 'GET') return false;
  const headers = req.headers;
  for (const name of HAPI_HEADERS) if (headers[name] !== undefined) return false;
  const length = headers['content-length'];
  if (length !== undefined && length !== '0') return false;
  return true;
}

/**
 * The path when hapi's own steps would leave it as sent: no escapes or dot segments (listeners.ts
 * rewrites those), no trailing or doubled slash, no fragment. The query is parsed as hapi parses it.
 */
function plainPath(url: string | undefined, q: number): string | undefined {
  if (url === undefined || url[0] !== '/' || url.includes('#')) return undefined;
  const path = q < 0 ? url : url.slice(0, q);
  if (path.includes('%') || path.includes('/.') || path.includes('//') || (path.length > 1 && path.endsWith('/'))) return undefined;
  return path;
}

/**
 * Put the fast lane in front of hapi on `server`'s listener; `routeOf` tells the route of a path (the
 * same table hapi's catch-all consults). `extra`: the listener's headers on every answer. `kept`: the
 * answer kept for a URL as sent, when it still holds; written at once, no request made of it.
 */
export function installFastLane(
  server: Hapi.Server, routeOf: (path: string) => FastRoute | undefined, log: Logger, extra?: () => Readonly<Record<string, string>> | undefined,
  kept?: (url: string) => Answer | undefined,
): void {
  const listener = server.listener;
  const [hapiDispatch] = listener.listeners('request') as ((req: IncomingMessage, res: ServerResponse) => void)[];
  if (!hapiDispatch) return;
  let inFlight = 0;
  let closing = false;
  let drained: (() => void) | undefined;
  const done = () => {
    if (--inFlight === 0) drained?.();
  };

  const take = (req: IncomingMessage, res: ServerResponse): boolean => {
    if (closing || !server.info.started || !plainRead(req)) return false;
    const url = req.url!;
    const q = url.indexOf('?');
    const path = plainPath(url, q);
    if (path === undefined) return false;
    const answer = kept?.(url);
    if (answer !== undefined) {
      writeAnswer(res, answer, extra?.());
      return true;
    }
    const route = routeOf(path);
    if (!route) return false;
    const query = q < 0 ? {} : parseQueryString(url.slice(q + 1));
    inFlight++;
    // A whole body is handed to the socket by writeAnswer (a stop may end the connection after it:
    // what is queued is still sent); a stream or a proxied answer counts until the response closes.
    let counted = true;
    const finish = () => {
      if (counted) done();
      counted = false;
    };
    route.serve({ method: 'get', path, params: route.params, query, raw: req, res, payload: undefined })
      .then((answer) => {
        if (answer === ABANDONED || streamed(answer)) {
          // A proxied answer may be over already.
          if (res.closed) finish();
          else res.once('close', finish);
          if (answer !== ABANDONED) writeAnswer(res, answer, extra?.());
          return;
        }
        writeAnswer(res, answer, extra?.());
        finish();
      })
      .catch((err: unknown) => {
        if (res.headersSent) res.destroy();
        else writeAnswer(res, errorAnswer(err, log, path), extra?.());
        finish();
      });
    return true;
  };

  listener.removeListener('request', hapiDispatch);
  listener.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (!take(req, res)) hapiDispatch(req, res);
  });
  server.ext('onPreStart', () => {
    closing = false;
  });
  // hapi ends connections it is not answering on as soon as it stops: the reads answered here finish first.
  server.ext('onPreStop', async () => {
    closing = true;
    if (inFlight === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      drained = resolve;
      timer = setTimeout(resolve, DRAIN_BOUND_MS);
    });
    clearTimeout(timer);
  });
}
