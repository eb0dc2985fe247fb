/**
 * Websocket upgrades (hapi has no websocket routes): matched against the websocket routes of the
 * pipeline and put through the same authentication and access policy before `ws` takes the socket.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { WebSocketServer } from 'ws';
import type Logger from 'bunyan';
import { badRequest, forbidden, isApiError, notFound } from '../../sdk/index.js';
import { endWithError } from './raw-answer.js';
import { checkAccess, matchWebsocket, type RoutePipeline } from './pipeline.js';
import { requestTarget } from './request-target.js';
import { isWebsocketUpgrade, serveIgnoringUpgrade } from './ignored-upgrade.js';
import { crossOriginRefusal } from './cross-origin.js';
import type { Caller } from './api-request.js';
import { stripPeerHeaders } from '../cluster/peer-headers.js';
import { bridgeWebsockets } from '../cluster/forward-websocket.js';
import { noteNews } from '../store/read-scope.js';

export type AuthenticateUpgrade = (raw: IncomingMessage, access: string) => Promise<Caller>;

/** Made on the first upgrade: a daemon nobody watches never loads ws. */
let wss: WebSocketServer | undefined;

async function websocketServer(): Promise<WebSocketServer> {
  if (!wss) {
    const { WebSocketServer } = await import('ws');
    if (!wss) {
      wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: 16 * 1024 * 1024 });
      // With a listener, ws leaves a refused handshake to us instead of answering text/html itself.
      wss.on('wsClientError', (_err, socket) => refuse(socket, badRequest('Invalid websocket handshake')));
    }
  }
  return wss;
}

const WEBSOCKET_KEY = /^[+/0-9A-Za-z]{22}==$/;

/** The handshake checks ws makes, done first so a refusal is the error envelope in our words. */
function checkHandshake(raw: IncomingMessage): void {
  const key = raw.headers['sec-websocket-key'];
  if (typeof key !== 'string' || !WEBSOCKET_KEY.test(key)) throw badRequest('Missing or invalid Sec-WebSocket-Key header');
  const version = raw.headers['sec-websocket-version'];
  if (version !== '13' && version !== '8') throw badRequest('Unsupported websocket version (Sec-WebSocket-Version 13 is expected)');
}

/** `allowedOrigin`: refuse upgrades from other sites' pages but this one (see cross-origin.ts); none refused when undefined. */
export function attachWebsockets(listener: Server, pipeline: RoutePipeline, authenticate: AuthenticateUpgrade, log: Logger, allowedOrigin?: () => string): void {
  listener.on('upgrade', (raw: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    // An upgrade nothing here can take (another protocol, or a path with no websocket) is a plain request.
    if (!isWebsocketUpgrade(raw) || !websocketTarget(pipeline, raw)) return serveIgnoringUpgrade(listener, raw, socket, head);
    upgrade(raw, socket, head, pipeline, authenticate, allowedOrigin).catch((err: unknown) => {
      if (!isApiError(err)) log.error({ err }, 'websocket upgrade failed');
      refuse(socket, err);
    });
  });
}

/** Whether a websocket route takes this request (a target that does not parse is the upgrade's to refuse). */
function websocketTarget(pipeline: RoutePipeline, raw: IncomingMessage): boolean {
  if ((raw.method ?? 'GET') !== 'GET') return false;
  try {
    return matchWebsocket(pipeline.websockets, requestTarget(raw.url ?? '/').path) !== undefined;
  } catch {
    return true;
  }
}

async function upgrade(
  raw: IncomingMessage, socket: Duplex, head: Buffer, pipeline: RoutePipeline, authenticate: AuthenticateUpgrade, allowedOrigin?: () => string,
): Promise<void> {
  // Matched as sent: dot segments are not resolved into another route (see request-target.ts).
  const { path } = requestTarget(raw.url ?? '/');
  const url = new URL(raw.url ?? '/', 'http://corral');
  const match = matchWebsocket(pipeline.websockets, path);
  if (!match || (raw.method ?? 'GET') !== 'GET') throw notFound();
  checkHandshake(raw);
  const refusal = allowedOrigin && crossOriginRefusal(raw.headers, allowedOrigin());
  if (refusal) throw forbidden(refusal);
  const spec = match.route.spec;
  const access = spec.access ?? 'trusted';
  const caller = await authenticate(raw, access);
  if (!caller.peer) stripPeerHeaders(raw.headers);
  const req = pipeline.buildRequest('GET', path, match.params, match.route.fixed, Object.fromEntries(url.searchParams), raw.headers, caller, undefined);
  checkAccess(caller, access, req.project, req.allProjects);
  await pipeline.checkProject(req);
  if (spec.query) {
    const result = spec.query.validate(req.query);
    if (result.error) throw badRequest(`Invalid query: ${result.error.message}`);
  }
  // In a cluster the socket may belong to another member: it is opened there first, so its refusal is the caller's answer.
  const forwarding = pipeline.forwarding;
  const member = forwarding && await forwarding.target(match.route.locate, req);
  if (member) {
    const upstream = await forwarding!.openWebsocket(member, raw, caller);
    const server = await websocketServer();
    if (socket.destroyed) return upstream.terminate();
    server.handleUpgrade(raw, socket, head, (ws) => {
      ws.on('error', () => ws.terminate());
      bridgeWebsockets(ws, upstream);
    });
    return;
  }
  await spec.accept?.(req);
  const server = await websocketServer();
  server.handleUpgrade(raw, socket, head, (ws) => {
    // A malformed frame is the client's fault: drop its socket, never crash the daemon (ws emits 'error').
    ws.on('error', () => ws.terminate());
    // A client's message may follow a write it saw acknowledged elsewhere: reads after it check the store again.
    ws.on('message', noteNews);
    spec.handler(req, ws);
  });
}

/** Answer a refused upgrade with the error envelope over plain HTTP. */
function refuse(socket: Duplex, err: unknown): void {
  if (isApiError(err)) endWithError(socket, err.status, err.message);
  else endWithError(socket, 500, 'Internal error');
}

/** Close every open websocket (events listeners, operation sockets) at shutdown. */
export function closeAllWebsockets(): void {
  for (const ws of wss?.clients ?? []) ws.close(1001, 'daemon shutting down');
}
