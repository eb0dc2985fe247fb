/**
 * Websocket upgrades (hapi has no websocket routes): matched against the websocket routes of the
 * pipeline and put through the same authentication and access policy before `ws` takes the socket.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { WebSocketServer } from 'ws';
import type Logger from 'bunyan';
import { badRequest, isApiError, notFound } from '../../sdk/index.js';
import { allowedStatus, errorBody } from './envelope.js';
import { checkAccess, matchWebsocket, type RoutePipeline } from './pipeline.js';
import type { Caller } from './api-request.js';

export type AuthenticateUpgrade = (raw: IncomingMessage, access: string) => Promise<Caller>;

/** Made on the first upgrade: a daemon nobody watches never loads ws. */
let wss: WebSocketServer | undefined;

async function websocketServer(): Promise<WebSocketServer> {
  if (!wss) {
    const { WebSocketServer } = await import('ws');
    wss ??= new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: 16 * 1024 * 1024 });
  }
  return wss;
}

export function attachWebsockets(listener: Server, pipeline: RoutePipeline, authenticate: AuthenticateUpgrade, log: Logger): void {
  listener.on('upgrade', (raw: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    upgrade(raw, socket, head, pipeline, authenticate).catch((err: unknown) => {
      if (!isApiError(err)) log.error({ err }, 'websocket upgrade failed');
      refuse(socket, err);
    });
  });
}

async function upgrade(raw: IncomingMessage, socket: Duplex, head: Buffer, pipeline: RoutePipeline, authenticate: AuthenticateUpgrade): Promise<void> {
  const url = new URL(raw.url ?? '/', 'http://corral');
  const match = matchWebsocket(pipeline.websockets, url.pathname);
  if (!match || (raw.method ?? 'GET') !== 'GET') throw notFound();
  const spec = match.route.spec;
  const access = spec.access ?? 'trusted';
  const caller = await authenticate(raw, access);
  const req = pipeline.buildRequest('GET', url.pathname, match.params, Object.fromEntries(url.searchParams), raw.headers, caller, undefined);
  checkAccess(caller, access, req.project, req.allProjects);
  await pipeline.checkProject(req);
  if (spec.query) {
    const result = spec.query.validate(req.query);
    if (result.error) throw badRequest(`Invalid query: ${result.error.message}`);
  }
  await spec.accept?.(req);
  const server = await websocketServer();
  server.handleUpgrade(raw, socket, head, (ws) => {
    // A malformed frame is the client's fault: drop its socket, never crash the daemon (ws emits 'error').
    ws.on('error', () => ws.terminate());
    spec.handler(req, ws);
  });
}

/** Answer a refused upgrade with the error envelope over plain HTTP. */
function refuse(socket: Duplex, err: unknown): void {
  const status = isApiError(err) ? err.status : allowedStatus(500);
  const message = isApiError(err) ? err.message : 'Internal error';
  const body = errorBody(status, message);
  if (socket.writable) {
    socket.end(`HTTP/1.1 ${status} ${status === 400 ? 'Bad Request' : status === 403 ? 'Forbidden' : status === 404 ? 'Not Found' : 'Error'}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  } else socket.destroy();
}

/** Close every open websocket (events listeners, operation sockets) at shutdown. */
export function closeAllWebsockets(): void {
  for (const ws of wss?.clients ?? []) ws.close(1001, 'daemon shutting down');
}
